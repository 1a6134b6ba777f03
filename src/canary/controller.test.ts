import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import type { AnyResource, CanaryConfig, CanaryConfigStatus, HTTPTrigger } from '../api/kinds.ts';
import { openSqliteStore, type SqliteStore } from '../store/sqlite.ts';
import { eventually } from '../testing/eventually.ts';
import { CanaryController } from './controller.ts';
import type { Counts, RequestCounters } from './counters.ts';

const logger = pino({ level: process.env.CANARY_TEST_LOG ?? 'silent' });

let dir: string;
let store: SqliteStore;
let controller: CanaryController | undefined;
/** What the fake router counted for v2 so far. */
let v2: Counts;
const counters: RequestCounters = { read: async () => [{ source: 'r', counts: new Map([['default/v2', { ...v2 }]]) }] };
/** Keeps requests flowing to v2, `failing` of each 100 answered 5xx. */
let traffic: NodeJS.Timeout | undefined;
const flow = (failing = 0) => {
  clearInterval(traffic);
  traffic = setInterval(() => {
    v2.requests += 100;
    v2.failures += failing;
  }, 20);
};

async function create(obj: { kind: AnyResource['kind']; metadata: { name: string }; spec: unknown; status?: unknown }): Promise<void> {
  await store.create({ apiVersion: 'flint.dev/v1', ...obj, metadata: { namespace: 'default', ...obj.metadata } } as AnyResource);
}

async function setup(weights: { v1: number; v2: number }, spec: Partial<CanaryConfig['spec']> = {}, status: CanaryConfigStatus = { status: 'pending' }) {
  for (const f of ['v1', 'v2']) {
    await create({ kind: 'Function', metadata: { name: f }, spec: { environment: { name: 'node' }, package: { packageref: { name: 'p' } } } });
  }
  await create({ kind: 'HTTPTrigger', metadata: { name: 'r' }, spec: { relativeurl: '/r', functionref: { type: 'function-weights', functionweights: weights } } });
  await create({
    kind: 'CanaryConfig',
    metadata: { name: 'c' },
    spec: { trigger: 'r', newfunction: 'v2', oldfunction: 'v1', weightincrement: 30, duration: '300ms', failurethreshold: 10, failureType: 'status-code', ...spec },
    status,
  });
}

const weightsNow = async () => (await store.get('HTTPTrigger', 'default', 'r'))?.spec.functionref.functionweights;
const canary = async () => (await store.get('CanaryConfig', 'default', 'c')) as CanaryConfig;

async function start(): Promise<CanaryController> {
  controller = new CanaryController({ store, counters, logger, retryMs: 100 });
  await controller.start();
  return controller;
}

/** Every weight the route had, in order, from the store's watch. */
function recordWeights(): Array<{ at: number; v2: number }> {
  const seen: Array<{ at: number; v2: number }> = [];
  store.watch({ kind: 'HTTPTrigger' }, (ev) => seen.push({ at: Date.now(), v2: (ev.object as HTTPTrigger).spec.functionref.functionweights?.v2 ?? -1 }));
  return seen;
}

describe('canary controller', () => {
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-canary-'));
    store = openSqliteStore(path.join(dir, 'flint.db'));
    v2 = { requests: 0, failures: 0 };
  });
  afterEach(async () => {
    clearInterval(traffic);
    await controller?.stop();
    controller = undefined;
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('moves the weights one step per interval while the new function is healthy, and succeeds at 100%', async () => {
    await setup({ v1: 100, v2: 0 });
    const seen = recordWeights();
    flow(5);
    const began = Date.now();
    await start();
    const done = await eventually(async () => ((await canary()).status?.status === 'succeeded' ? canary() : undefined), 'succeeded', 10_000);
    assert.deepEqual(await weightsNow(), { v1: 0, v2: 100 });
    assert.deepEqual(
      seen.map((s) => s.v2),
      [30, 60, 90, 100],
    );
    // One interval apart, each.
    let last = began;
    for (const s of seen) {
      assert.ok(s.at - last >= 290, `a step ${s.at - last} ms after the one before`);
      last = s.at;
    }
    assert.equal(done.status?.newWeight, 100);
    assert.equal(done.status?.failureRate, 5);
    assert.ok((done.status?.requests ?? 0) > 0);
    assert.match(done.status?.message ?? '', /^succeeded: all of 'v1''s traffic is on 'v2' \(100%\) \(failure rate 5% of \d+ requests in the last 300ms\)$/);
    assert.deepEqual(controller?.active(), [], 'a finished canary is let go');
  });

  it('records a move whose status write failed instead of moving again', async () => {
    await setup({ v1: 100, v2: 0 });
    const seen = recordWeights();
    flow(0);
    let failures = 0;
    // The store, but the first status write of the first step fails (an API server gone for a moment).
    const flaky = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'updateStatus') {
          return async (obj: CanaryConfig) => {
            if (obj.status?.newWeight === 30 && failures++ === 0) throw new Error('the store is unreachable');
            return target.updateStatus(obj);
          };
        }
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    controller = new CanaryController({ store: flaky, counters, logger, retryMs: 100 });
    await controller.start();
    await eventually(async () => (await canary()).status?.status === 'succeeded', 'succeeded', 10_000);
    assert.equal(failures, 2, 'the failed write was made again');
    assert.deepEqual(
      seen.map((s) => s.v2),
      [30, 60, 90, 100],
      'one move per step',
    );
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].at - seen[i - 1].at >= 290, `a step ${seen[i].at - seen[i - 1].at} ms after the one before`);
  });

  it('rolls everything back to the old function when an interval crosses the threshold, and records the rate', async () => {
    await setup({ v1: 100, v2: 0 });
    const seen = recordWeights();
    flow(50);
    await start();
    const failed = await eventually(async () => ((await canary()).status?.status === 'failed' ? canary() : undefined), 'failed', 10_000);
    assert.deepEqual(await weightsNow(), { v1: 100, v2: 0 });
    assert.deepEqual(
      seen.map((s) => s.v2),
      [30, 0],
      'the first step is not judged (no traffic yet); the second interval is, and rolls back',
    );
    assert.equal(failed.status?.failureRate, 50);
    assert.equal(failed.status?.newWeight, 0);
    assert.match(failed.status?.message ?? '', /^failure rate 50% \(\d+ of \d+ requests to 'v2' answered 5xx in the last 300ms\) is above the threshold of 10%: all its traffic is back on 'v1'$/);
  });

  it('holds the weights over an interval without traffic to the new function', async () => {
    await setup({ v1: 70, v2: 30 }, {}, { status: 'pending', newWeight: 30, lastStepTime: new Date().toISOString(), observedGeneration: 1 });
    await start();
    await eventually(async () => /no request reached it in the last 300ms/.test((await canary()).status?.message ?? ''), 'a hold');
    assert.deepEqual(await weightsNow(), { v1: 70, v2: 30 });
    flow(0);
    await eventually(async () => (await weightsNow())?.v2 === 60, 'the next step once traffic flows');
  });

  it('after a restart, carries on from the recorded step: the next one comes one interval after it, from the weights the route has', async () => {
    const stepped = Date.now() - 100;
    await setup({ v1: 40, v2: 60 }, { duration: '1s' }, { status: 'pending', newWeight: 60, lastStepTime: new Date(stepped).toISOString(), observedGeneration: 1 });
    const seen = recordWeights();
    flow(0);
    await start();
    await eventually(async () => seen.length > 0, 'the next step', 5000);
    assert.equal(seen[0].v2, 90, 'one step on from 60');
    assert.ok(seen[0].at >= stepped + 1000, `the step came ${seen[0].at - stepped} ms after the recorded one`);
    assert.ok(seen[0].at < stepped + 1800, `the step came ${seen[0].at - stepped} ms after the recorded one`);
  });

  it('records a rollback that reached the route but not the status before a restart', async () => {
    await setup({ v1: 100, v2: 0 }, {}, { status: 'pending', newWeight: 60, lastStepTime: new Date().toISOString(), observedGeneration: 1 });
    await start();
    const failed = await eventually(async () => ((await canary()).status?.status === 'failed' ? canary() : undefined), 'failed');
    assert.match(failed.status?.message ?? '', /the route gives 'v2' nothing although the rollout had it at 60%/);
  });

  it('stops, leaving the weights, when the route no longer carries the canary', async () => {
    await setup({ v1: 100, v2: 0 });
    await start();
    await eventually(async () => (await weightsNow())?.v2 === 30, 'the first step');
    await store.delete('HTTPTrigger', 'default', 'r');
    const aborted = await eventually(async () => ((await canary()).status?.status === 'aborted' ? canary() : undefined), 'aborted');
    assert.match(aborted.status?.message ?? '', /^HTTPTrigger 'r' no longer exists: the canary stopped/);
  });

  it('stops on an interval that means no time, written around the control plane (kubectl)', async () => {
    await setup({ v1: 100, v2: 0 }, { duration: 'soon' });
    await start();
    const aborted = await eventually(async () => ((await canary()).status?.status === 'aborted' ? canary() : undefined), 'aborted');
    assert.match(aborted.status?.message ?? '', /^spec\.duration: 'soon' is not a duration/);
    assert.deepEqual(await weightsNow(), { v1: 100, v2: 0 });
  });

  it('starts a failed canary over with a new spec, and lets a deleted canary go', async () => {
    await setup({ v1: 100, v2: 0 }, { duration: '10s' }, { status: 'failed', newWeight: 0, message: 'rolled back', observedGeneration: 1 });
    await start();
    assert.deepEqual(controller?.active(), [], 'a finished canary is not taken up');
    const cur = await canary();
    // A new spec (generation 2): a new rollout, whatever the status says of the first.
    const { status: _, ...rest } = cur;
    await store.update({ ...rest, spec: { ...cur.spec, duration: '300ms' } });
    await eventually(async () => (await weightsNow())?.v2 === 30, 'a step at the new interval', 3000);
    const again = await canary();
    assert.equal(again.status?.observedGeneration, 2);
    assert.equal(again.status?.status, 'pending');
    assert.equal(again.status?.message, "'v2' at 30%");
    await store.delete('CanaryConfig', 'default', 'c');
    await eventually(() => controller?.active().length === 0, 'let go');
  });
});
