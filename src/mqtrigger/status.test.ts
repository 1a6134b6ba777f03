// A trigger's status transitions, and the writer that publishes them only
// when they change.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { MessageQueueTrigger } from '../api/kinds.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { nextStatus, TriggerStatusWriter } from './status.ts';

/** The store with some of its methods replaced. */
function withStore(store: Store, over: Partial<Record<keyof Store, unknown>>): Store {
  const out: Record<string, unknown> = {};
  for (const k of ['get', 'list', 'create', 'update', 'updateStatus', 'delete', 'watch', 'close'] as const) out[k] = over[k] ?? store[k].bind(store);
  return out as unknown as Store;
}

const T0 = '2025-01-01T00:00:00.000Z';
const T1 = '2025-01-01T00:01:00.000Z';
const T2 = '2025-01-01T00:02:00.000Z';

describe('trigger status transitions', () => {
  it('starts with the first state the manager reports', () => {
    assert.deepEqual(nextStatus(undefined, { state: 'consuming' }, 1, T0), { state: 'consuming', lastTransitionTime: T0, observedGeneration: 1 });
    assert.deepEqual(nextStatus({}, { state: 'waiting', message: 'no rabbitmq broker: set rabbitmq.enabled=true' }, 1, T0), {
      state: 'waiting',
      message: 'no rabbitmq broker: set rabbitmq.enabled=true',
      lastTransitionTime: T0,
      observedGeneration: 1,
    });
  });

  it('says nothing when the state, its message and the generation are the same', () => {
    const waiting = nextStatus(undefined, { state: 'waiting', message: 'no broker' }, 1, T0);
    assert.equal(nextStatus(waiting, { state: 'waiting', message: 'no broker' }, 1, T1), undefined);
    const failing = nextStatus(undefined, { state: 'error', message: 'ECONNREFUSED' }, 1, T0);
    assert.equal(nextStatus(failing, { state: 'error', message: 'ECONNREFUSED' }, 1, T1), undefined, 'a broker refusing again and again writes once');
    const consuming = nextStatus(undefined, { state: 'consuming' }, 1, T0);
    assert.equal(nextStatus(consuming, { state: 'consuming' }, 1, T1), undefined);
  });

  it('records an error with its time, and keeps it once the trigger recovers', () => {
    const consuming = nextStatus(undefined, { state: 'consuming' }, 1, T0);
    const failing = nextStatus(consuming, { state: 'error', message: 'Socket closed unexpectedly' }, 1, T1);
    assert.deepEqual(failing, {
      state: 'error',
      message: 'Socket closed unexpectedly',
      lastTransitionTime: T1,
      lastError: 'Socket closed unexpectedly',
      lastErrorTime: T1,
      observedGeneration: 1,
    });
    const back = nextStatus(failing, { state: 'consuming' }, 1, T2);
    assert.deepEqual(back, { state: 'consuming', lastTransitionTime: T2, lastError: 'Socket closed unexpectedly', lastErrorTime: T1, observedGeneration: 1 });
  });

  it('moves the error time with a new error but not the transition time', () => {
    const first = nextStatus(undefined, { state: 'error', message: 'a' }, 1, T0);
    const second = nextStatus(first, { state: 'error', message: 'b' }, 1, T1);
    assert.deepEqual(second, { state: 'error', message: 'b', lastTransitionTime: T0, lastError: 'b', lastErrorTime: T1, observedGeneration: 1 });
  });

  it('speaks of the spec it is about: a new generation is a change', () => {
    const consuming = nextStatus(undefined, { state: 'consuming' }, 1, T0);
    assert.deepEqual(nextStatus(consuming, { state: 'consuming' }, 2, T1), { state: 'consuming', lastTransitionTime: T0, observedGeneration: 2 });
  });

  it('clips a long message to what the schema takes', () => {
    const s = nextStatus(undefined, { state: 'error', message: 'x'.repeat(10_000) }, 1, T0);
    assert.equal(s?.message?.length, 4096);
    assert.ok(s?.message?.endsWith('...'));
  });
});

describe('trigger status writer', () => {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mqts-'));
    store = openSqliteStore(path.join(dir, 'flint.db'));
    await store.create<MessageQueueTrigger>({
      apiVersion: 'flint.dev/v1',
      kind: 'MessageQueueTrigger',
      metadata: { name: 'orders', namespace: 'default' },
      spec: { functionref: { type: 'name', name: 'f' }, messageQueueType: 'redis', topic: 'in' },
    } as MessageQueueTrigger);
  });
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const read = async () => (await store.get('MessageQueueTrigger', 'default', 'orders')) as MessageQueueTrigger;

  it('writes a change once, and nothing when the stored status already says it', async () => {
    const w = new TriggerStatusWriter({ store });
    w.report('default', 'orders', 1, { state: 'consuming' });
    await w.settled();
    const after = await read();
    assert.equal(after.status?.state, 'consuming');
    w.report('default', 'orders', 1, { state: 'consuming' });
    await w.settled();
    // A second writer (a restarted manager) finds it stored as it is.
    const again = new TriggerStatusWriter({ store });
    again.report('default', 'orders', 1, { state: 'consuming' });
    await again.settled();
    assert.equal((await read()).metadata.resourceVersion, after.metadata.resourceVersion, 'no write');
  });

  it('folds reports that come during a write into the latest', async () => {
    let writes = 0;
    const counting: Store = withStore(store, {
      updateStatus: (o: MessageQueueTrigger) => {
        writes++;
        return store.updateStatus(o);
      },
    });
    const w = new TriggerStatusWriter({ store: counting });
    w.report('default', 'orders', 1, { state: 'waiting', message: 'a' });
    w.report('default', 'orders', 1, { state: 'error', message: 'b' });
    w.report('default', 'orders', 1, { state: 'consuming' });
    await w.settled();
    assert.equal((await read()).status?.state, 'consuming');
    assert.ok(writes <= 2, `at most the first and the latest (${writes})`);
  });

  it('reads again when the trigger changed in between', async () => {
    let conflicts = 1;
    const racing: Store = withStore(store, {
      updateStatus: async (o: MessageQueueTrigger) => {
        if (conflicts-- > 0) await store.update({ ...(await read()), metadata: { ...(await read()).metadata, labels: { touched: 'yes' } } });
        return store.updateStatus(o);
      },
    });
    const w = new TriggerStatusWriter({ store: racing });
    w.report('default', 'orders', 1, { state: 'consuming' });
    await w.settled();
    const t = await read();
    assert.equal(t.status?.state, 'consuming');
    assert.equal(t.metadata.labels?.touched, 'yes', 'the change in between is kept');
  });

  it('leaves a status about an older spec unwritten, and a deleted trigger alone', async () => {
    const cur = await read();
    await store.update({ ...cur, spec: { ...cur.spec, topic: 'other' } });
    const w = new TriggerStatusWriter({ store });
    w.report('default', 'orders', 1, { state: 'error', message: 'old' });
    await w.settled();
    assert.deepEqual((await read()).status ?? {}, {});
    await store.delete('MessageQueueTrigger', 'default', 'orders');
    const errors: unknown[] = [];
    const w2 = new TriggerStatusWriter({ store, onError: (_k, e) => errors.push(e) });
    w2.report('default', 'orders', 2, { state: 'consuming' });
    await w2.settled();
    assert.deepEqual(errors, []);
  });

  it('tries a failed write again, and stops waiting when stopped', async () => {
    let fail = 1;
    const flaky: Store = withStore(store, {
      updateStatus: (o: MessageQueueTrigger) => (fail-- > 0 ? Promise.reject(new Error('store unavailable')) : store.updateStatus(o)),
    });
    const errors: string[] = [];
    const w = new TriggerStatusWriter({ store: flaky, retryMs: 10, onError: (_k, e) => errors.push((e as Error).message) });
    w.report('default', 'orders', 1, { state: 'consuming' });
    await w.settled();
    assert.deepEqual(errors, ['store unavailable']);
    assert.equal((await read()).status?.state, 'consuming');
    const stuck: Store = withStore(store, { updateStatus: () => Promise.reject(new Error('down')) });
    const w2 = new TriggerStatusWriter({ store: stuck, retryMs: 60_000 });
    w2.report('default', 'orders', 1, { state: 'waiting', message: 'x' });
    const t = Date.now();
    await new Promise((r) => setTimeout(r, 50));
    await w2.stop();
    assert.ok(Date.now() - t < 5000, 'stop does not wait out the retry');
  });
});
