import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type FakeKube, startFakeKube } from '../../test/fake-kube/server.ts';
import { createKubeClient } from '../store/kube-client.ts';
import { routerEndpoints } from './router-endpoints.ts';

describe("the router pods' addresses (kubernetes mode)", () => {
  let fake: FakeKube;
  before(async () => {
    fake = await startFakeKube({ resources: [{ group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices', kind: 'EndpointSlice' }] });
  });
  after(() => fake.close());

  const slice = (name: string, service: string, endpoints: unknown[], ports: unknown[] = [{ name: 'http-router', port: 8080 }], addressType = 'IPv4') => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'flint', labels: { 'kubernetes.io/service-name': service } },
    addressType,
    ports,
    endpoints,
  });

  it("lists the ready endpoints of the router Service's slices, with the router port", async () => {
    fake.put('endpointslices', slice('router-a', 'router', [
      { addresses: ['10.0.0.2'], conditions: { ready: true } },
      { addresses: ['10.0.0.3'], conditions: { ready: false } },
      { addresses: ['10.0.0.4'] },
    ]));
    fake.put('endpointslices', slice('router-b', 'router', [{ addresses: ['fd00::5'], conditions: { ready: true } }], [{ name: 'other', port: 1 }, { name: 'http-router', port: 8080 }], 'IPv6'));
    fake.put('endpointslices', slice('controller-a', 'controller', [{ addresses: ['10.0.0.9'] }]));
    const client = createKubeClient({ baseUrl: fake.url });
    assert.deepEqual(await routerEndpoints(client, 'flint'), ['http://10.0.0.2:8080', 'http://10.0.0.4:8080', 'http://[fd00::5]:8080']);
  });
});
