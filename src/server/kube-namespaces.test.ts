// Start-up's namespaces in kubernetes mode, against the fake API server
// holding Namespaces as the real one does.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type FakeKube, NAMESPACE_RESOURCE, startFakeKube } from '../../test/fake-kube/server.ts';
import { createKubeClient } from '../store/kube-client.ts';
import { ensureNamespaces } from './kube-namespaces.ts';

const quiet = { info() {}, debug() {} };
const needs = [
  { name: 'flint', purpose: "Flint's own" },
  { name: 'flint-function', purpose: 'where function pods run', labels: { 'istio-injection': 'enabled' } },
];

async function withFake(body: (fake: FakeKube) => Promise<void>): Promise<void> {
  const fake = await startFakeKube({ resources: [NAMESPACE_RESOURCE], requireNamespaces: true });
  try {
    await body(fake);
  } finally {
    await fake.close();
  }
}

describe('kubernetes namespaces at start-up', () => {
  it('creates the missing ones, with their labels, and leaves existing ones alone', () =>
    withFake(async (fake) => {
      fake.put('namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'flint' } });
      const client = createKubeClient({ baseUrl: fake.url });
      await ensureNamespaces(client, needs, quiet);
      const made = fake.objects('namespaces').map((n) => [n.metadata.name, n.metadata.labels?.['istio-injection']]);
      assert.deepEqual(made, [
        ['flint', undefined],
        ['flint-function', 'enabled'],
      ]);
      const writes = fake.requests.filter((r) => r.method !== 'GET').map((r) => `${r.method} ${r.path}`);
      assert.deepEqual(writes, ['POST /api/v1/namespaces']);
      await ensureNamespaces(client, needs, quiet);
      assert.equal(fake.requests.filter((r) => r.method !== 'GET').length, 1, 'nothing more to write');
    }));

  it('names the missing namespace and what to do when it may not create it', () =>
    withFake(async (fake) => {
      fake.put('namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'flint' } });
      fake.failNext({ method: 'POST', path: '/namespaces' }, 403);
      await assert.rejects(ensureNamespaces(createKubeClient({ baseUrl: fake.url }), needs, quiet), (err: any) => {
        assert.equal(err.code, 'FLINT_ERR_NAMESPACE_NOT_FOUND');
        assert.match(err.message, /^namespace 'flint-function' \(where function pods run\) does not exist, and .* may not create it: create it \(kubectl create namespace flint-function\)/);
        return true;
      });
    }));

  it('takes namespaces it may not read as there (the chart makes them and grants no read)', () =>
    withFake(async (fake) => {
      fake.failNext({ method: 'GET', path: '/namespaces' }, 403, 2);
      await ensureNamespaces(createKubeClient({ baseUrl: fake.url }), needs, quiet);
      assert.equal(fake.requests.filter((r) => r.method !== 'GET').length, 0);
    }));
});
