import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KIND_NAMES, type Package, type Secret } from '../api/kinds.ts';
import { storeResources } from '../../test/fake-kube/crd-resources.ts';
import { type FakeKube, NAMESPACE_RESOURCE, startFakeKube } from '../../test/fake-kube/server.ts';
import { eventually } from '../testing/eventually.ts';
import { createKubeClient } from './kube-client.ts';
import { GENERATION_ANNOTATION } from './kube-objects.ts';
import { type KubeStore, openKubeStore } from './kubernetes.ts';
import { env, runStoreContract } from './store.contract.ts';
import type { WatchEvent } from './store.ts';

const TOKEN = 'store-token';
let contractFake: FakeKube | undefined;
// Whatever the contract writes, the server finds no field it would drop.
const contractWarnings: string[] = [];
runStoreContract('kubernetes (fake API server)', {
  async open() {
    contractFake = await startFakeKube({ token: TOKEN, resources: storeResources() });
    return openKubeStore({ client: createKubeClient({ baseUrl: contractFake.url, token: TOKEN, onWarning: (w, r) => contractWarnings.push(`${r.method} ${r.path}: ${w}`) }) });
  },
  async cleanup() {
    await contractFake?.close();
    assert.deepEqual(contractWarnings, []);
  },
});

async function withStore(body: (s: KubeStore, fake: FakeKube) => Promise<void>, o: { eventRetention?: number } = {}): Promise<void> {
  const fake = await startFakeKube({ token: TOKEN, resources: storeResources() });
  const store = await openKubeStore({ client: createKubeClient({ baseUrl: fake.url, token: TOKEN }), retryDelayMs: 20, eventRetention: o.eventRetention });
  try {
    await body(store, fake);
  } finally {
    await store.close();
    await fake.close();
  }
}

function pkg(name: string): Package {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Package',
    metadata: { name, namespace: 'default' } as Package['metadata'],
    spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: Buffer.from('x').toString('base64') } },
  };
}

function secret(name: string, data: Record<string, string>): Secret {
  return { apiVersion: 'flint.dev/v1', kind: 'Secret', metadata: { name, namespace: 'default' } as Secret['metadata'], data };
}

describe('kubernetes store', () => {
  it('keeps Flint kinds as custom resources that pass the committed CRD schemas', () =>
    withStore(async (s, fake) => {
      await s.create(env('a', { team: 'x' }));
      const [stored] = fake.objects('environments.flint.dev', 'default');
      assert.equal(stored.apiVersion, 'flint.dev/v1');
      assert.deepEqual(stored.metadata.labels, { team: 'x' });
      // The same API server refuses an object written around Flint that the CRD's schema does not allow.
      const client = createKubeClient({ baseUrl: fake.url, token: TOKEN });
      const gvr = { group: 'flint.dev', version: 'v1', resource: 'environments' };
      const bad = { apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'bad' }, spec: { poolsize: 'three', runtime: { image: 'x' } } };
      await assert.rejects(client.create(gvr, 'default', bad), (err: any) => err.code === 'FLINT_ERR_VALIDATION' && /poolsize/.test(err.message));
    }));

  it('keeps Secrets as the cluster\'s own, base64 inside, with a generation that follows the data', () =>
    withStore(async (s, fake) => {
      const created = await s.create(secret('db', { password: 'p@ss wörd' }));
      assert.equal(created.metadata.generation, 1);
      const [stored] = fake.objects('secrets', 'default');
      assert.equal(stored.apiVersion, 'v1');
      assert.equal(stored.type, 'Opaque');
      assert.equal(Buffer.from(stored.data.password, 'base64').toString('utf8'), 'p@ss wörd');
      assert.deepEqual((await s.get('Secret', 'default', 'db'))?.data, { password: 'p@ss wörd' });
      const relabeled = await s.update({ ...created, metadata: { ...created.metadata, labels: { a: 'b' } } });
      assert.equal(relabeled.metadata.generation, 1);
      assert.equal(relabeled.metadata.annotations, undefined, 'the generation annotation stays inside');
      const changed = await s.update({ ...relabeled, data: { password: 'new' } });
      assert.equal(changed.metadata.generation, 2);
      assert.equal(fake.objects('secrets', 'default')[0].metadata.annotations[GENERATION_ANNOTATION], '2');
      await assert.rejects(s.update({ ...relabeled, data: { password: 'stale' } }), (err: any) => err.code === 'FLINT_ERR_CONFLICT');
    }));

  it('writes a Package status through the status subresource, without a new generation', () =>
    withStore(async (s) => {
      const created = await s.create({ ...pkg('p'), status: { buildstatus: 'pending' } });
      assert.deepEqual(created.status, { buildstatus: 'pending' });
      const built = await s.updateStatus({ ...created, status: { buildstatus: 'succeeded', buildlog: 'ok' } });
      assert.equal(built.metadata.generation, created.metadata.generation);
      const relabeled = await s.update({ ...built, metadata: { ...built.metadata, labels: { x: '1' } }, status: undefined });
      assert.deepEqual(relabeled.status, { buildstatus: 'succeeded', buildlog: 'ok' }, 'an update keeps the status');
      assert.deepEqual((await s.get('Package', 'default', 'p'))?.status, { buildstatus: 'succeeded', buildlog: 'ok' });
    }));

  it('keeps watching when the API server ends its watch streams', () =>
    withStore(async (s, fake) => {
      const events: WatchEvent[] = [];
      const w = s.watch({ kind: 'Environment' }, (ev) => events.push(ev));
      await s.create(env('a'));
      await eventually(() => events.length === 1, 'the first event');
      fake.endWatches();
      await eventually(() => fake.watchCount() === KIND_NAMES.length, 'every informer watching again');
      await s.create(env('b'));
      await eventually(() => events.map((e) => e.object.metadata.name).join() === 'a,b', 'both events');
      w.close();
    }));

  it('after the API server forgot its history, lists again and reports what changed meanwhile', () =>
    withStore(async (s, fake) => {
      const a = await s.create(env('a'));
      await s.create(env('b'));
      const { resourceVersion: before } = await s.list('Environment');
      const events: WatchEvent[] = [];
      const w = s.watch({ kind: 'Environment', sinceResourceVersion: before }, (ev) => events.push(ev));
      // The environments informer's next watch fails, and the changes it would have seen are compacted away.
      fake.failNext({ method: 'GET', path: '/environments' }, 503, 1);
      const failedBefore = fake.requests.filter((r) => r.path.includes('environments?watch')).length;
      fake.endWatches();
      await eventually(() => fake.requests.filter((r) => r.path.includes('environments?watch')).length > failedBefore, 'the failed watch');
      const client = createKubeClient({ baseUrl: fake.url, token: TOKEN });
      const gvr = { group: 'flint.dev', version: 'v1', resource: 'environments' };
      const stored = await client.get<any>(gvr, 'default', 'a');
      await client.replace(gvr, 'default', 'a', { ...stored, spec: { ...stored.spec, poolsize: 7 } });
      await client.delete(gvr, 'default', 'b');
      fake.compact();
      await eventually(() => events.map((e) => `${e.type} ${e.object.metadata.name}`).join() === 'MODIFIED a,DELETED b', 'the relist\'s changes');
      assert.equal((events[0].object as typeof a).spec.poolsize, 7);
      w.close();
      // Versions from before the relist can no longer be replayed one by one.
      assert.throws(() => s.watch({ kind: 'Environment', sinceResourceVersion: before }, () => {}), (err: any) => err.code === 'FLINT_ERR_GONE');
    }));

  it('keeps following across an API-server restart: streams end, the history is gone and the first requests get 429', () =>
    withStore(async (s, fake) => {
      await s.create(env('a'));
      const events: WatchEvent[] = [];
      const w = s.watch({ kind: 'Environment' }, (ev) => events.push(ev));
      const lists = () => fake.requests.filter((r) => r.path.startsWith('/apis/flint.dev/v1/environments') && !r.path.includes('watch=1')).length;
      const listsBefore = lists();
      fake.failNext({ method: 'GET', path: '/environments' }, 429, 3, { retryAfterSeconds: 0.1 });
      fake.endWatches();
      const client = createKubeClient({ baseUrl: fake.url, token: TOKEN });
      await client.create({ group: 'flint.dev', version: 'v1', resource: 'environments' }, 'default', { ...env('b'), metadata: { name: 'b', namespace: 'default' } } as any);
      // A restarted server's watch cache starts after what the informer saw: its watch gets 410.
      fake.compact();
      await eventually(() => events.some((e) => e.type === 'ADDED' && e.object.metadata.name === 'b'), 'the change made while it was away');
      assert.ok(lists() > listsBefore, 'it listed again (410)');
      w.close();
    }));

  it('says a namespace is missing rather than the object', async () => {
    const fake = await startFakeKube({ token: TOKEN, resources: [...storeResources(), NAMESPACE_RESOURCE], requireNamespaces: true });
    const store = await openKubeStore({ client: createKubeClient({ baseUrl: fake.url, token: TOKEN }) });
    try {
      await assert.rejects(store.create({ ...secret('router', { k: 'v' }), metadata: { name: 'router', namespace: 'flint' } as Secret['metadata'] }), (err: any) => {
        assert.equal(err.code, 'FLINT_ERR_NAMESPACE_NOT_FOUND');
        assert.match(err.message, /namespace 'flint' does not exist/);
        return true;
      });
    } finally {
      await store.close();
      await fake.close();
    }
  });

  it('refuses to resume from a version older than it has followed since it opened', async () => {
    const fake = await startFakeKube({ token: TOKEN, resources: storeResources() });
    const client = createKubeClient({ baseUrl: fake.url, token: TOKEN });
    try {
      const earlier = await openKubeStore({ client });
      const a = await earlier.create(env('a'));
      await earlier.close();
      const later = await openKubeStore({ client });
      try {
        const before = String(Number(a.metadata.resourceVersion) - 1);
        assert.throws(() => later.watch({ kind: 'Environment', sinceResourceVersion: before }, () => {}), (err: any) => err.code === 'FLINT_ERR_GONE');
        assert.throws(() => later.watch({ sinceResourceVersion: 'x' }, () => {}), (err: any) => err.code === 'FLINT_ERR_VALIDATION');
      } finally {
        await later.close();
      }
    } finally {
      await fake.close();
    }
  });

  it('replays from its log while it holds the version, and answers FLINT_ERR_GONE once it dropped it', () =>
    withStore(
      async (s) => {
        const { resourceVersion: start } = await s.list('Environment');
        const seen: string[] = [];
        const live = s.watch({ kind: 'Environment' }, (ev) => seen.push(ev.object.metadata.name));
        await s.create(env('a'));
        const b = await s.create(env('b'));
        await s.create(env('c'));
        await eventually(() => seen.join() === 'a,b,c', 'three live events');
        live.close();
        assert.throws(() => s.watch({ kind: 'Environment', sinceResourceVersion: start }, () => {}), (err: any) => err.code === 'FLINT_ERR_GONE');
        const replayed: string[] = [];
        const w = s.watch({ kind: 'Environment', sinceResourceVersion: b.metadata.resourceVersion }, (ev) => replayed.push(ev.object.metadata.name));
        await eventually(() => replayed.join() === 'c', 'the replayed event');
        w.close();
      },
      { eventRetention: 2 },
    ));
});
