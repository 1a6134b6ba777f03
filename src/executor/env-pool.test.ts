import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { Environment } from '../api/kinds.ts';
import { START_ABANDONED } from './core/types.ts';
import { EnvPool } from './env-pool.ts';
import { MAX_GROWTH } from './first-calls.ts';
import type { WorkerHandle } from './process/worker-process.ts';

function env(poolsize?: number): Environment {
  return { apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'nodejs', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' }, ...(poolsize === undefined ? {} : { poolsize }) } } as Environment;
}

/** Workers that start at once and die when killed; counts what is alive. */
function fakeWorkers() {
  let alive = 0;
  let started = 0;
  const factory = async (): Promise<WorkerHandle> => {
    started++;
    alive++;
    let up = true;
    const ev = new EventEmitter();
    const exited = new Promise<{ code: number | null; signal: string | null }>((r) => ev.once('exit', () => r({ code: 0, signal: null })));
    return {
      id: `w${started}`,
      isAlive: () => up,
      exited,
      kill: async () => {
        if (up) {
          up = false;
          alive--;
          ev.emit('exit');
        }
      },
    } as unknown as WorkerHandle;
  };
  return { factory, alive: () => alive, started: () => started };
}

const settle = () => new Promise((r) => setTimeout(r, 20));
const log = pino({ level: 'silent' });

describe('EnvPool', () => {
  it('keeps its size, and grows to the largest burst of the last minute, then shrinks back', async () => {
    let now = 1_000_000;
    const w = fakeWorkers();
    const pool = new EnvPool(env(3), 3, w.factory, log, () => true, () => now);
    pool.refill();
    await settle();
    assert.equal(pool.idleCount, 3);
    // A burst of 20 takes within a second: 3 warm, 17 misses.
    const got = Array.from({ length: 20 }, () => pool.take()).filter(Boolean);
    assert.equal(got.length, 3);
    assert.equal(pool.target, 20);
    await settle();
    assert.equal(pool.idleCount, 20, 'the next burst of 20 finds its workers warm');
    // Takes a second apart are separate bursts: the peak stays 20.
    now += 1500;
    pool.take();
    assert.equal(pool.target, 20);
    // A minute after the burst, the extra idle workers stop.
    now += 60_000;
    assert.equal(pool.target, 3);
    pool.trim();
    await settle();
    assert.equal(pool.idleCount, 3);
    await pool.close();
    assert.equal(w.alive(), got.length + 1, 'only the taken workers are left');
  });

  it('grows by at most MAX_GROWTH, and not at all for a pool of size 0', async () => {
    const now = 5_000_000;
    const w = fakeWorkers();
    const pool = new EnvPool(env(2), 3, w.factory, log, () => true, () => now);
    for (let i = 0; i < MAX_GROWTH + 50; i++) pool.take();
    assert.equal(pool.target, 2 + MAX_GROWTH);
    await pool.close();
    const none = new EnvPool(env(0), 3, w.factory, log, () => true, () => now);
    for (let i = 0; i < 10; i++) none.take();
    assert.equal(none.target, 0);
    await settle();
    assert.equal(none.idleCount, 0);
    await none.close();
  });

  it('grows ahead for the first calls expected soon, the larger of those and the last burst, within MAX_GROWTH', async () => {
    let now = 7_000_000;
    let expected = 0;
    const w = fakeWorkers();
    const pool = new EnvPool(env(3), 3, w.factory, log, () => true, () => now, () => expected);
    pool.refill();
    await settle();
    assert.equal(pool.idleCount, 3);
    expected = 20;
    assert.equal(pool.target, 23);
    pool.refill();
    await settle();
    assert.equal(pool.idleCount, 23, 'twenty new functions find a warm worker each, beside the pool of 3');
    // Their burst: each take is one of them called, no longer expected, and not remembered as a burst, since the
    // pool grew for it already: after it, the pool is back to its size, not grown again by as many.
    for (let i = 0; i < 20; i++) {
      assert.ok(pool.take(false));
      expected--;
      assert.equal(pool.target, 3 + expected);
    }
    await settle();
    assert.equal(pool.idleCount, 3);
    assert.equal(w.started(), 23, 'twenty new functions cost twenty starts');
    // A burst of functions not expected (called before, their instances reaped since) grows it as before; expected
    // calls beside it count only where they exceed it.
    for (let i = 0; i < 10; i++) pool.take();
    assert.equal(pool.target, 10);
    expected = 5;
    assert.equal(pool.target, 10);
    expected = 12;
    assert.equal(pool.target, 15);
    expected = 0;
    now += 61_000;
    assert.equal(pool.target, 3);
    expected = MAX_GROWTH + 100;
    assert.equal(pool.target, 3 + MAX_GROWTH);
    await pool.close();
    const none = new EnvPool(env(0), 3, w.factory, log, () => true, () => now, () => 5);
    assert.equal(none.target, 0, 'a pool of size 0 does not grow ahead either');
    await none.close();
  });

  it('starts workers beyond its size only when the room check allows growth', async () => {
    const now = 9_000_000;
    const w = fakeWorkers();
    let growthAllowed = false;
    const asked: boolean[] = [];
    const pool = new EnvPool(env(2), 3, w.factory, log, (_e, growth) => {
      asked.push(growth);
      return !growth || growthAllowed;
    }, () => now);
    for (let i = 0; i < 10; i++) pool.take();
    await settle();
    assert.equal(pool.idleCount, 2, 'the size is kept, growth waits');
    assert.ok(asked.includes(true));
    growthAllowed = true;
    pool.refill();
    await settle();
    assert.equal(pool.idleCount, 10);
    await pool.close();
  });

  it('starts a worker of the new settings when a start of the old ones is given up (the environment changed while it waited)', async () => {
    const w = fakeWorkers();
    let abandon = true;
    const seen: string[] = [];
    let finishFirst: (() => void) | undefined;
    const factory = async (e: Environment): Promise<WorkerHandle> => {
      seen.push(e.spec.runtime.image);
      if (abandon) {
        abandon = false;
        // Waits its turn, which comes after the update, and is then given up.
        await new Promise<void>((r) => (finishFirst = r));
        throw START_ABANDONED;
      }
      return w.factory();
    };
    const pool = new EnvPool(env(1), 3, factory, log);
    pool.refill();
    await settle();
    await pool.update({ ...env(1), spec: { runtime: { image: 'flint/node-env-2' }, poolsize: 1 } } as Environment);
    // The old start still counts as on its way: nothing new yet.
    assert.deepEqual(seen, ['flint/node-env']);
    finishFirst?.();
    await settle();
    assert.deepEqual(seen, ['flint/node-env', 'flint/node-env-2']);
    assert.equal(pool.idleCount, 1);
    await pool.close();
  });

  it('never keeps a worker that finished starting with the old settings after the environment changed: it is stopped and replaced', async () => {
    const w = fakeWorkers();
    const seen: string[] = [];
    let finishFirst: (() => void) | undefined;
    const factory = async (e: Environment): Promise<WorkerHandle> => {
      seen.push(e.spec.runtime.image);
      if (seen.length === 1) await new Promise<void>((r) => (finishFirst = r));
      return w.factory();
    };
    const pool = new EnvPool(env(1), 3, factory, log);
    pool.refill();
    await settle();
    await pool.update({ ...env(1), spec: { runtime: { image: 'flint/node-env-2' }, poolsize: 1 } } as Environment);
    finishFirst?.();
    await settle();
    assert.deepEqual(seen, ['flint/node-env', 'flint/node-env-2']);
    assert.equal(pool.idleCount, 1);
    assert.equal(w.alive(), 1, 'the worker of the old settings was stopped');
    assert.equal(pool.take()?.id, 'w2', 'the one idle worker is the new settings\'');
    await pool.close();
  });
});
