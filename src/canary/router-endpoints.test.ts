import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type FakeKube, startFakeKube } from '../../test/fake-kube/server.ts';
import { createKubeClient } from '../store/kube-client.ts';
import { routerEndpoints } from './router-endpoints.ts';

describe("the router pods' addresses (kubernetes mode)", () => {
  let fake: FakeKube;
  before(async () => {
    fake = await startFakeKube({
      resources: [
        { group: '', version: 'v1', resource: 'services', kind: 'Service' },
        { group: '', version: 'v1', resource: 'pods', kind: 'Pod' },
      ],
    });
  });
  after(() => fake.close());

  const selector = { 'app.kubernetes.io/name': 'flint', 'app.kubernetes.io/component': 'router' };
  const pod = (name: string, ip: string | undefined, ready: boolean, labels: Record<string, string> = selector, extra: Record<string, unknown> = {}) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'flint', labels, ...extra },
    spec: { containers: [{ name: 'flint', ports: [{ name: 'http-router', containerPort: 8080 }] }] },
    status: { ...(ip ? { podIP: ip } : {}), conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  });

  it('has none without the router Service', async () => {
    assert.deepEqual(await routerEndpoints(createKubeClient({ baseUrl: fake.url }), 'flint'), []);
  });

  it("lists the Ready pods the router Service selects, at the port it targets", async () => {
    fake.put('services', {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'router', namespace: 'flint' },
      spec: { selector, ports: [{ name: 'http-router', port: 80, targetPort: 'http-router' }] },
    });
    fake.put('pods', pod('router-a', '10.0.0.2', true));
    fake.put('pods', pod('router-b', '10.0.0.3', false));
    fake.put('pods', pod('router-c', undefined, false));
    fake.put('pods', pod('router-d', 'fd00::5', true));
    fake.put('pods', pod('router-e', '10.0.0.6', true, selector, { deletionTimestamp: '2026-01-01T00:00:00Z' }));
    fake.put('pods', pod('controller', '10.0.0.9', true, { 'app.kubernetes.io/name': 'flint', 'app.kubernetes.io/component': 'controller' }));
    const client = createKubeClient({ baseUrl: fake.url });
    assert.deepEqual(await routerEndpoints(client, 'flint'), ['http://10.0.0.2:8080', 'http://[fd00::5]:8080']);
  });
});
