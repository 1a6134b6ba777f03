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
import type { Connector, Subscription } from './connector.ts';
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
