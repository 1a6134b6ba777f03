// The function namespace's pods from one watch: waiting readers wake on
// changes instead of listing, and a lost history means one relist.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { POD_RESOURCE } from '../../../test/fake-kube/kubelet.ts';
import { startFakeKube } from '../../../test/fake-kube/server.ts';
import { eventually } from '../../testing/eventually.ts';
import { createKubeClient } from '../../store/kube-client.ts';
import { FunctionPods, isReady } from './function-pods.ts';

const pod = (name: string, labels: Record<string, string>, ready = false) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'fn', labels },
  spec: {},
  status: ready ? { podIP: '127.0.0.9', conditions: [{ type: 'Ready', status: 'True' }] } : {},
});

describe('function pods', () => {
  it('wakes every waiter on a change, with one list however many wait', async () => {
    const fake = await startFakeKube({ resources: [POD_RESOURCE] });
    const pods = new FunctionPods({ client: createKubeClient({ baseUrl: fake.url }), namespace: 'fn', onError: () => {} });
    try {
      await pods.start();
      fake.put('pods', pod('other', { app: 'not-flint' }, true));
      const waiting = Array.from({ length: 20 }, () => pods.waitFor(() => pods.list({ executorType: 'poolmgr' }).find(isReady)?.metadata.name, Date.now() + 10_000));
      await new Promise((r) => setTimeout(r, 300));
      fake.put('pods', pod('a', { executorType: 'poolmgr' }));
      fake.put('pods', pod('a', { executorType: 'poolmgr' }, true));
      assert.deepEqual(await Promise.all(waiting), Array(20).fill('a'));
      const lists = fake.requests.filter((r) => r.path.startsWith('/api/v1/namespaces/fn/pods') && !r.path.includes('watch=1'));
      assert.equal(lists.length, 1);
      assert.deepEqual(
        pods.list().map((p) => p.metadata.name),
        ['a'],
        "pods Flint did not make are not followed",
      );
      assert.equal(await pods.waitFor(() => undefined, Date.now() + 50), undefined, 'a deadline ends the wait');
      pods.deleted('a');
      assert.deepEqual(pods.list(), [], 'a pod deleted here is gone before the watch says so');
    } finally {
      await pods.stop();
      await fake.close();
    }
  });

  it('lists again when the watch finds its version expired (410)', async () => {
    const fake = await startFakeKube({ resources: [POD_RESOURCE] });
    const pods = new FunctionPods({ client: createKubeClient({ baseUrl: fake.url }), namespace: 'fn', onError: () => {}, retryDelayMs: 10 });
    try {
      fake.put('pods', pod('a', { executorType: 'poolmgr' }));
      await pods.start();
      fake.failNext({ method: 'GET', path: '/pods' }, 503);
      fake.endWatches();
      fake.put('pods', pod('b', { executorType: 'poolmgr' }));
      fake.compact();
      await eventually(() => pods.list().length === 2, 'the pod made while the watch was down');
      assert.equal(fake.requests.filter((r) => r.path.startsWith('/api/v1/namespaces/fn/pods') && !r.path.includes('watch=1')).length, 2);
    } finally {
      await pods.stop();
      await fake.close();
    }
  });
});
