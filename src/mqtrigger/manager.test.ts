// The trigger manager's lifecycle against a stand-in connector: a trigger
// stopped while its connector or subscription is still being made, and one
// waiting for a broker, stop at once and leave nothing running.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { pino } from 'pino';
import type { MessageQueueTrigger } from '../api/kinds.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { eventually } from '../testing/eventually.ts';
import type { Connector, SubscribeOptions, Subscription } from './connector.ts';
import type { ConnectorLease } from './trigger-connectors.ts';
import { createTriggerManager } from './manager.ts';

let dir: string;
let store: Store;

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mqtm-'));
  store = openSqliteStore(path.join(dir, 'flint.db'));
  await store.create<MessageQueueTrigger>({
    apiVersion: 'flint.dev/v1',
    kind: 'MessageQueueTrigger',
    metadata: { name: 'orders', namespace: 'default' },
    spec: { functionref: { type: 'name', name: 'f' }, messageQueueType: 'kafka', topic: 'in' },
  } as MessageQueueTrigger);
});
afterEach(async () => {
  mock.timers.reset();
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A promise and its resolver, for holding a call open until the test lets it go. */
function later<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** A connector whose subscribe() answers when the test says, and which counts what happens to it. */
function standIn() {
  const subscribed = later<void>();
  const subscription = later<Subscription>();
  const counts = { subscribed: 0, closed: 0, released: 0 };
  const ended = later<void>();
  const sub: Subscription = {
    done: ended.promise,
    close: async () => {
      counts.closed++;
      ended.resolve();
    },
  };
  const connector: Connector = {
    ensureTopic: async () => {},
    publish: async () => {},
    close: async () => {},
    subscribe: () => {
      counts.subscribed++;
      subscribed.resolve();
      return subscription.promise;
    },
  };
  const lease: ConnectorLease = {
    connector,
    release: async () => {
      counts.released++;
    },
  };
  return { lease, counts, subscribed: subscribed.promise, answer: () => subscription.resolve(sub) };
}

const logger = pino({ level: 'silent' });

describe('trigger manager', () => {
  it('stops a trigger whose connector is still being made, and gives the connector back', { timeout: 10_000 }, async () => {
    const c = standIn();
    const asked = later<void>();
    const given = later<ConnectorLease>();
    const m = createTriggerManager({ store, logger, routerUrl: () => 'http://127.0.0.1:1', connector: () => {
        asked.resolve();
        return given.promise;
      },
    });
    await m.start();
    await asked.promise;
    const stopped = m.stop();
    given.resolve(c.lease);
    await stopped;
    assert.deepEqual(c.counts, { subscribed: 0, closed: 0, released: 1 });
  });

  it('closes a subscription that arrives after the trigger was stopped', { timeout: 10_000 }, async () => {
    const c = standIn();
    const m = createTriggerManager({ store, logger, routerUrl: () => 'http://127.0.0.1:1', connector: async () => c.lease });
    await m.start();
    await c.subscribed;
    const stopped = m.stop();
    c.answer();
    await stopped;
    assert.deepEqual(c.counts, { subscribed: 1, closed: 1, released: 1 });
  });

  it('stops a trigger that waits for its broker without waiting out its backoff', { timeout: 10_000 }, async () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    let asked = 0;
    const m = createTriggerManager({
      store,
      logger,
      routerUrl: () => 'http://127.0.0.1:1',
      connector: async () => {
        asked++;
        return 'no Kafka broker';
      },
    });
    await m.start();
    await eventually(() => asked === 1, 'the first attempt');
    // The clock does not move: stop() must not depend on the backoff timer firing.
    await m.stop();
    assert.equal(asked, 1);
  });
});

/** A connector whose subscriptions the test ends, and whose subscribe() fails while `refuse` holds an error. */
function controllable() {
  const subs: Array<{ opts: SubscribeOptions; end: (err?: Error) => void }> = [];
  const state: { refuse?: Error } = {};
  const connector: Connector = {
    ensureTopic: async () => {},
    publish: async () => {},
    close: async () => {},
    subscribe: async (opts) => {
      if (state.refuse) throw state.refuse;
      let end!: (err?: Error) => void;
      const done = new Promise<void>((resolve, reject) => {
        end = (err) => (err ? reject(err) : resolve());
      });
      done.catch(() => {});
      subs.push({ opts, end });
      return { done, close: async () => end() };
    },
  };
  return { lease: { connector, release: async () => {} } as ConnectorLease, subs, state };
}

describe('trigger status', () => {
  const status = async () => (await store.get('MessageQueueTrigger', 'default', 'orders'))?.status ?? {};
  /** Status writes seen on the store's watch. */
  function countWrites(): { count: () => number; close: () => void } {
    let n = 0;
    const w = store.watch({ kind: 'MessageQueueTrigger' }, (ev) => {
      if (ev.type === 'MODIFIED') n++;
    });
    return { count: () => n, close: () => w.close() };
  }

  it('says what a trigger waits for, once however often it tries again', { timeout: 10_000 }, async () => {
    const writes = countWrites();
    let asked = 0;
    const m = createTriggerManager({
      store,
      logger,
      routerUrl: () => 'http://127.0.0.1:1',
      reconnectBaseMs: 1,
      connector: async () => {
        asked++;
        return "no rabbitmq broker: set rabbitmq.enabled=true and rabbitmq.url, or the trigger's metadata host";
      },
    });
    await m.start();
    await eventually(async () => asked >= 5 && (await status()).state === 'waiting', 'the trigger waiting, tried again');
    await m.statusSettled();
    assert.match((await status()).message ?? '', /rabbitmq\.enabled=true/);
    assert.equal(writes.count(), 1, 'one write for one state');
    await m.stop();
    writes.close();
  });

  it('goes from consuming to error with the last error, and back to consuming with the error kept', { timeout: 10_000 }, async () => {
    const c = controllable();
    const m = createTriggerManager({ store, logger, routerUrl: () => 'http://127.0.0.1:1', reconnectBaseMs: 1, connector: async () => c.lease });
    await m.start();
    await eventually(async () => (await status()).state === 'consuming', 'consuming');
    const writes = countWrites();
    c.state.refuse = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    c.subs[0].end(new Error('Socket closed unexpectedly'));
    await eventually(async () => (await status()).state === 'error', 'the error');
    // It keeps trying while the broker is gone: the error it reports is the latest.
    await eventually(async () => (await status()).message === 'connect ECONNREFUSED 127.0.0.1:6379', 'the refusal');
    await new Promise((r) => setTimeout(r, 100));
    await m.statusSettled();
    const failing = await status();
    assert.equal(failing.lastError, 'connect ECONNREFUSED 127.0.0.1:6379');
    assert.ok(failing.lastErrorTime !== undefined && Date.parse(failing.lastErrorTime) > 0);
    assert.equal(writes.count(), 2, 'one write per error, not per attempt');
    c.state.refuse = undefined;
    await eventually(async () => (await status()).state === 'consuming', 'consuming again');
    const back = await status();
    assert.equal(back.lastError, 'connect ECONNREFUSED 127.0.0.1:6379', 'the last error is kept');
    assert.equal(back.message, undefined);
    await m.stop();
    writes.close();
  });

  it("follows a client that reconnects by itself, and says nothing more while it consumes", { timeout: 10_000 }, async () => {
    const c = controllable();
    const m = createTriggerManager({ store, logger, routerUrl: () => 'http://127.0.0.1:1', reconnectBaseMs: 1, connector: async () => c.lease });
    await m.start();
    await eventually(async () => (await status()).state === 'consuming', 'consuming');
    c.subs[0].opts.onBrokerTrouble?.('lost the connection to the NATS server 127.0.0.1:4222; reconnecting');
    await eventually(async () => (await status()).state === 'error', 'the error');
    assert.match((await status()).lastError ?? '', /lost the connection/);
    c.subs[0].opts.onBrokerTrouble?.(undefined);
    await eventually(async () => (await status()).state === 'consuming', 'consuming again');
    assert.equal(c.subs.length, 1, 'the same subscription');
    // Restarted, the manager finds the status as it is and writes nothing.
    await m.stop();
    const writes = countWrites();
    const again = createTriggerManager({ store, logger, routerUrl: () => 'http://127.0.0.1:1', connector: async () => controllable().lease });
    await again.start();
    await new Promise((r) => setTimeout(r, 100));
    await again.statusSettled();
    assert.equal(writes.count(), 0);
    await again.stop();
    writes.close();
  });

  it('calls a connector that cannot be made an error', { timeout: 10_000 }, async () => {
    const m = createTriggerManager({
      store,
      logger,
      routerUrl: () => 'http://127.0.0.1:1',
      reconnectBaseMs: 1,
      connector: async () => {
        throw new Error('bad TLS material');
      },
    });
    await m.start();
    await eventually(async () => (await status()).state === 'error', 'the error');
    assert.equal((await status()).message, 'its connector could not be made: bad TLS material');
    await m.stop();
  });
});
