// A burst of first calls grows the environment's warm pool (env-pool.ts),
// but growth stops at three quarters of the instance budget, so that the
// functions' own instances never have to stop warm workers to start. Real
// (unsandboxed) Node workers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FunctionResource, Package } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';
import { eventually } from '../testing/eventually.ts';
import { InstanceBudget } from './instance-budget.ts';
import type { ProcessExecutor } from './process-executor.ts';
import { startTestProcessExecutor } from './process-testing.ts';

const CODE = 'module.exports = async () => ({ status: 200, body: "ok" });';

let store: Store;
let executor: ProcessExecutor;
let stop: () => Promise<void>;
const budget = new InstanceBudget({ maxInstances: 8, maxMemoryMB: 100_000 });

before(async () => {
  // Environment `node` with a pool of 1.
  ({ store, executor, stop } = await startTestProcessExecutor(undefined, budget));
  await store.create<Package>({
    apiVersion: 'flint.dev/v1',
    kind: 'Package',
    metadata: { name: 'p', namespace: 'default' },
    spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from(CODE).toString('base64') } },
  } as Package);
});

after(() => stop());

describe('pool growth', () => {
  it('a burst grows the pool, up to three quarters of the budget', async () => {
    await eventually(() => executor.status().pools['default/node'] === 1, 'the pool to hold its one worker');
    const fns: FunctionResource[] = [];
    for (let i = 0; i < 4; i++) {
      fns.push(
        await store.create<FunctionResource>({
          apiVersion: 'flint.dev/v1',
          kind: 'Function',
          metadata: { name: `f${i}`, namespace: 'default' },
          spec: { environment: { name: 'node' }, package: { packageref: { name: 'p' } } },
        } as FunctionResource),
      );
    }
    // Four first calls at once: the pool's one worker, and three process starts.
    const leases = await Promise.all(fns.map((f) => executor.acquire(f)));
    for (const l of leases) l.release();
    // The burst took 4: the pool would grow to 4 idle workers, 8 in all with the
    // functions' instances; three quarters of 8 stops it at 6 in all, 2 idle.
    await eventually(() => executor.status().pools['default/node'] === 2, 'the pool to grow to 2 idle workers');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(executor.status().pools['default/node'], 2);
    assert.equal(budget.instances, 6);
  });
});

describe('pool growth ahead of first calls', () => {
  let store2: Store;
  let executor2: ProcessExecutor;
  let stop2: () => Promise<void>;
  before(async () => {
    // The same environment (pool of 1), with functions created or changed counting for 300 s.
    ({ store: store2, executor: executor2, stop: stop2 } = await startTestProcessExecutor(undefined, undefined, 300));
    await store2.create<Package>({
      apiVersion: 'flint.dev/v1',
      kind: 'Package',
      metadata: { name: 'p', namespace: 'default' },
      spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from(CODE).toString('base64') } },
    } as Package);
  });
  after(() => stop2());

  it('new functions each hold a warm worker ready until they are called', async () => {
    await eventually(() => executor2.status().pools['default/node'] === 1, 'the pool to hold its one worker');
    const fns: FunctionResource[] = [];
    for (let i = 0; i < 4; i++) {
      fns.push(
        await store2.create<FunctionResource>({
          apiVersion: 'flint.dev/v1',
          kind: 'Function',
          metadata: { name: `g${i}`, namespace: 'default' },
          spec: { environment: { name: 'node' }, package: { packageref: { name: 'p' } } },
        } as FunctionResource),
      );
    }
    // Before any call: the pool's one and one for each new function.
    await eventually(() => executor2.status().pools['default/node'] === 5, 'the pool to grow to 5 idle workers');
    const leases = await Promise.all(fns.map((f) => executor2.acquire(f)));
    for (const l of leases) l.release();
    assert.deepEqual(
      fns.map((f) => executor2.status().functions[`default/${f.metadata.name}`]?.instances),
      [1, 1, 1, 1],
    );
    // Called, they no longer count, and their four takes are not remembered as a burst (the pool grew for them
    // already): it keeps its size, one idle worker, rather than starting 3 or 4 more.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(executor2.status().pools['default/node'], 1);
  });
});

describe('pool growth ahead of first calls, within the budget', () => {
  let store3: Store;
  let executor3: ProcessExecutor;
  let stop3: () => Promise<void>;
  const budget3 = new InstanceBudget({ maxInstances: 8, maxMemoryMB: 100_000 });
  before(async () => {
    ({ store: store3, executor: executor3, stop: stop3 } = await startTestProcessExecutor(undefined, budget3, 300));
    await store3.create<Package>({
      apiVersion: 'flint.dev/v1',
      kind: 'Package',
      metadata: { name: 'p', namespace: 'default' },
      spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from(CODE).toString('base64') } },
    } as Package);
  });
  after(() => stop3());

  it('deploying many functions fills at most three quarters of the budget, and every function still gets an instance', async () => {
    await eventually(() => executor3.status().pools['default/node'] === 1, 'the pool to hold its one worker');
    const fns: FunctionResource[] = [];
    for (let i = 0; i < 20; i++) {
      fns.push(
        await store3.create<FunctionResource>({
          apiVersion: 'flint.dev/v1',
          kind: 'Function',
          metadata: { name: `h${i}`, namespace: 'default' },
          spec: { environment: { name: 'node' }, package: { packageref: { name: 'p' } } },
        } as FunctionResource),
      );
    }
    // Twenty expected first calls, but growth stops at 6 of the budget's 8.
    await eventually(() => executor3.status().pools['default/node'] === 6, 'the pool to grow to 6 idle workers');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(executor3.status().pools['default/node'], 6);
    assert.equal(budget3.instances, 6);
    // Nine functions called one after another (each released before the next): the warm workers serve six, the
    // rest start in what growth left to functions, reclaiming idle instances once the budget is spent; none fails.
    const instancesOf = (f: FunctionResource) => executor3.status().functions[`default/${f.metadata.name}`]?.instances ?? 0;
    for (const f of fns.slice(0, 9)) {
      (await executor3.acquire(f)).release();
      assert.equal(instancesOf(f), 1);
    }
    assert.ok(budget3.instances <= 8);
    const running = fns.slice(0, 9).reduce((n, f) => n + instancesOf(f), 0);
    assert.ok(running >= 7, `${running} of the nine functions' instances still running`);
  });
});
