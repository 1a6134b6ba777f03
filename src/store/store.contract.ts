// The shared contract every Store backend must pass. A backend's test file
// calls runStoreContract with a factory; nothing here knows the backend.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ErrorCode } from '../api/errors.ts';
import type { Environment, FunctionResource } from '../api/kinds.ts';
import type { Store, WatchEvent } from './store.ts';

export interface StoreFactory {
  open(): Promise<Store>;
  cleanup(): Promise<void>;
}

export function env(name: string, labels?: Record<string, string>, namespace = 'default'): Environment {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Environment',
    metadata: { name, namespace, labels } as Environment['metadata'],
    spec: { runtime: { image: 'flint/node-env' }, poolsize: 1 },
  };
}

function fn(name: string): FunctionResource {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Function',
    metadata: { name, namespace: 'default' } as FunctionResource['metadata'],
    spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'p' } } },
  };
}

async function rejectsWith(p: Promise<unknown>, code: ErrorCode): Promise<void> {
  await assert.rejects(p, (err: any) => {
    assert.equal(err.code, code);
    return true;
  });
}

/** Collects watch events until `count` arrived. */
function collect(store: Store, opts: Parameters<Store['watch']>[0], count: number) {
  const events: WatchEvent[] = [];
  let done!: () => void;
  const finished = new Promise<void>((r) => {
    done = r;
  });
  const w = store.watch(opts, (ev) => {
    events.push(ev);
    if (events.length >= count) done();
  });
  const timer = setTimeout(done, 5000);
  return {
    events,
    async wait() {
      await finished;
      clearTimeout(timer);
      w.close();
      return events;
    },
  };
}

export function runStoreContract(name: string, factory: StoreFactory): void {
  describe(`Store contract: ${name}`, () => {
    const withStore = (body: (s: Store) => Promise<void>) => async () => {
      const s = await factory.open();
      try {
        await body(s);
      } finally {
        await s.close();
        await factory.cleanup();
      }
    };

    it(
      'create sets server fields and get returns the object',
      withStore(async (s) => {
        const created = await s.create(env('a'));
        assert.match(created.metadata.uid, /^[0-9a-f-]{36}$/);
        assert.match(created.metadata.resourceVersion, /^[0-9]+$/);
        assert.equal(created.metadata.generation, 1);
        assert.ok(created.metadata.creationTimestamp);
        assert.deepEqual(await s.get('Environment', 'default', 'a'), created);
        assert.equal(await s.get('Environment', 'default', 'missing'), undefined);
        assert.equal(await s.get('Function', 'default', 'a'), undefined);
      }),
    );

    it(
      'refuses a duplicate name and keeps the first',
      withStore(async (s) => {
        const first = await s.create(env('a'));
        await rejectsWith(s.create(env('a')), 'FLINT_ERR_ALREADY_EXISTS');
        assert.deepEqual(await s.get('Environment', 'default', 'a'), first);
        await s.create(env('a', undefined, 'other'));
      }),
    );

    it(
      'update enforces resourceVersion and bumps generation only on spec change',
      withStore(async (s) => {
        const a = await s.create(env('a'));
        const relabeled = await s.update({ ...a, metadata: { ...a.metadata, labels: { x: '1' } } });
        assert.equal(relabeled.metadata.generation, 1);
        assert.ok(Number(relabeled.metadata.resourceVersion) > Number(a.metadata.resourceVersion));
        await rejectsWith(s.update({ ...a, spec: { ...a.spec, poolsize: 2 } }), 'FLINT_ERR_CONFLICT');
        const b = await s.update({ ...relabeled, spec: { ...a.spec, poolsize: 2 } });
        assert.equal(b.metadata.generation, 2);
        assert.equal(b.metadata.uid, a.metadata.uid);
        assert.equal(b.metadata.creationTimestamp, a.metadata.creationTimestamp);
        await rejectsWith(s.update(env('nope')), 'FLINT_ERR_NOT_FOUND');
      }),
    );

    it(
      'delete returns the object, honours resourceVersion, and 404s after',
      withStore(async (s) => {
        const a = await s.create(env('a'));
        await rejectsWith(s.delete('Environment', 'default', 'a', { resourceVersion: '999999' }), 'FLINT_ERR_CONFLICT');
        const gone = await s.delete('Environment', 'default', 'a', { resourceVersion: a.metadata.resourceVersion });
        assert.equal(gone.metadata.uid, a.metadata.uid);
        assert.equal(await s.get('Environment', 'default', 'a'), undefined);
        await rejectsWith(s.delete('Environment', 'default', 'a'), 'FLINT_ERR_NOT_FOUND');
      }),
    );

    it(
      'list filters by namespace and label selector',
      withStore(async (s) => {
        await s.create(env('a', { tier: 'web', team: 'x' }));
        await s.create(env('b', { tier: 'db' }));
        await s.create(env('c', undefined, 'other'));
        await s.create(fn('f'));
        const names = async (o: Parameters<Store['list']>[1]) => (await s.list('Environment', o)).items.map((e) => e.metadata.name);
        assert.deepEqual(await names({}), ['a', 'b', 'c']);
        assert.deepEqual(await names({ namespace: 'default' }), ['a', 'b']);
        assert.deepEqual(await names({ labelSelector: 'tier=web' }), ['a']);
        assert.deepEqual(await names({ labelSelector: 'tier!=web' }), ['b', 'c']);
        assert.deepEqual(await names({ labelSelector: 'team' }), ['a']);
        assert.deepEqual(await names({ labelSelector: '!team,tier' }), ['b']);
        await rejectsWith(s.list('Environment', { labelSelector: 'a=b=c' }), 'FLINT_ERR_VALIDATION');
      }),
    );

    it(
      'watch delivers live events in order, filtered by kind',
      withStore(async (s) => {
        const c = collect(s, { kind: 'Environment' }, 3);
        const a = await s.create(env('a'));
        await s.create(fn('f'));
        await s.update({ ...a, spec: { ...a.spec, poolsize: 5 } });
        await s.delete('Environment', 'default', 'a');
        const evs = await c.wait();
        assert.deepEqual(
          evs.map((e) => [e.type, e.object.kind]),
          [
            ['ADDED', 'Environment'],
            ['MODIFIED', 'Environment'],
            ['DELETED', 'Environment'],
          ],
        );
      }),
    );

    it(
      'watch resumes from a resourceVersion without gaps or repeats',
      withStore(async (s) => {
        await s.create(env('a'));
        const { resourceVersion } = await s.list('Environment');
        await s.create(env('b'));
        await s.create(env('c'));
        const c = collect(s, { kind: 'Environment', sinceResourceVersion: resourceVersion }, 3);
        await s.create(env('d'));
        const evs = await c.wait();
        assert.deepEqual(
          evs.map((e) => e.object.metadata.name),
          ['b', 'c', 'd'],
        );
      }),
    );
  });
}
