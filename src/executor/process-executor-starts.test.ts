// The process executor starts at most executor.concurrentStarts worker
// processes at once: a burst of first calls to different functions queues
// the rest, and every call is still served.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Environment, FunctionResource, Package } from '../api/kinds.ts';
import { LocalArchiveStore } from '../archive/index.ts';
import { dataLayout } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { unixRequest } from './process/unix-http.ts';
import { createProcessExecutor, type ProcessExecutor } from './process-executor.ts';

const CODE = "module.exports = async () => ({ status: 200, body: 'hi' });";

let root: string;
let store: Store;
let executor: ProcessExecutor;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-starts-'));
  const layout = dataLayout(root);
  store = openSqliteStore(layout.db);
  // No warm pool: every first call starts a process.
  await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'node', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 0 } } as Environment);
  await store.create<Package>({ apiVersion: 'flint.dev/v1', kind: 'Package', metadata: { name: 'pkg', namespace: 'default' }, spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from(CODE).toString('base64') } } } as Package);
  executor = createProcessExecutor({
    store,
    layout,
    logger: pino({ level: 'silent' }),
    sandbox: 'none',
    memoryMB: 128,
    poolSize: 0,
    concurrentStarts: 2,
    reapIntervalMs: 60_000,
    archives: new LocalArchiveStore(layout.archives),
  });
  await executor.start();
});

after(async () => {
  await executor.stop();
  await store.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('process executor: concurrent starts', () => {
  it('starts at most concurrentStarts workers at once in a burst of first calls, queues the others, and serves every call', async () => {
    assert.deepEqual(executor.starts(), { starting: 0, waiting: 0, limit: 2 });
    const fns = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        store.create<FunctionResource>({ apiVersion: 'flint.dev/v1', kind: 'Function', metadata: { name: `f${i}`, namespace: 'default' }, spec: { environment: { name: 'node' }, package: { packageref: { name: 'pkg' } } } } as FunctionResource),
      ),
    );
    const seen: Array<{ starting: number; waiting: number }> = [];
    let done = false;
    const sample = (async () => {
      while (!done) {
        seen.push(executor.starts());
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    try {
      const bodies = await Promise.all(
        fns.map(async (fn) => {
          const lease = await executor.acquire(fn);
          try {
            const r = await unixRequest(lease.socketPath as string, 'GET', '/', { timeoutMs: 10_000 });
            return r.text;
          } finally {
            lease.release();
          }
        }),
      );
      assert.deepEqual(bodies, Array(6).fill('hi'));
    } finally {
      done = true;
      await sample;
    }
    // All six asked within a few milliseconds, and a start takes tens: two went, four waited. Had a third gone, at
    // most three would ever have waited.
    assert.equal(Math.max(...seen.map((s) => s.waiting)), 4, `four starts waited for their turn at once: ${JSON.stringify(seen)}`);
    assert.ok(seen.every((s) => s.starting <= 2));
    assert.deepEqual(executor.starts(), { starting: 0, waiting: 0, limit: 2 });
  });

  it("never starts a pool worker queued behind first calls once its environment has changed: only the new spec's start", async () => {
    // Each pool worker's runtime loads a preload (NODE_OPTIONS, from the environment's runtime env) that notes which
    // spec it was started from.
    const notes = path.join(root, 'pool-starts.log');
    const preload = (tag: string, code: string) => {
      const file = path.join(root, `${tag}.cjs`);
      fs.writeFileSync(file, code);
      return { NODE_OPTIONS: `--require ${file}` };
    };
    const note = (tag: string) => preload(tag, `require('node:fs').appendFileSync(${JSON.stringify(notes)}, ${JSON.stringify(`${tag}\n`)});\n`);
    // First calls whose workers take 300 ms to start (a preload that sleeps), so that none is done before the
    // pool's start has queued behind them.
    const slow = preload('slow', 'Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);\n');
    const slowSpec: Environment['spec'] = { runtime: { image: 'flint/node-env', env: slow }, poolsize: 0 };
    await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'slow', namespace: 'default' }, spec: slowSpec } as Environment);
    await store.create<Package>({ apiVersion: 'flint.dev/v1', kind: 'Package', metadata: { name: 'slowpkg', namespace: 'default' }, spec: { environment: { name: 'slow' }, deployment: { type: 'literal', literal: Buffer.from(CODE).toString('base64') } } } as Package);
    const fns = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        store.create<FunctionResource>({ apiVersion: 'flint.dev/v1', kind: 'Function', metadata: { name: `g${i}`, namespace: 'default' }, spec: { environment: { name: 'slow' }, package: { packageref: { name: 'slowpkg' } } } } as FunctionResource),
      ),
    );
    // They hold both places and queue four more starts, ahead of any pool worker's.
    const calls = Promise.all(
      fns.map(async (fn) => {
        const lease = await executor.acquire(fn);
        lease.release();
      }),
    );
    await eventually(() => executor.starts().waiting === 4, 'four first calls waiting for their turn');
    const spec: Environment['spec'] = { runtime: { image: 'flint/node-env', env: note('old') }, poolsize: 1 };
    const env = await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'pooled', namespace: 'default' }, spec } as Environment);
    await eventually(() => executor.starts().waiting === 5, "the pool's start queued behind them");
    await store.update<Environment>({ ...env, spec: { ...env.spec, runtime: { image: 'flint/node-env', env: note('new') } } });
    await calls;
    await eventually(() => fs.existsSync(notes) && fs.readFileSync(notes, 'utf8').includes('new'), 'a pool worker of the new spec');
    // Time for a stale start to have run, had it not been dropped.
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(fs.readFileSync(notes, 'utf8').split('\n').filter(Boolean), ['new']);
  });
});

async function eventually(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
