// A burst of first calls grows the environment's warm pool (env-pool.ts),
// but growth stops at three quarters of the instance budget, so that the
// functions' own instances never have to stop warm workers to start; and
// new functions grow it ahead of their first calls. Real (unsandboxed) Node
// workers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FunctionResource, Package } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';
import { eventually } from '../testing/eventually.ts';
import { InstanceBudget } from './instance-budget.ts';
import type { ProcessExecutor } from './process-executor.ts';
import { startTestProcessExecutor } from './process-testing.ts';

const CODE = 'module.exports = async () => ({ status: 200, body: "ok" });';

interface Setup {
  store: Store;
  executor: ProcessExecutor;
  stop(): Promise<void>;
}

/** An executor with environment `node` (a pool of 1) and package `p`, its pool holding its one worker. */
async function setUp(budget?: InstanceBudget, firstCallWindowSeconds?: number): Promise<Setup> {
  const s = await startTestProcessExecutor(undefined, budget, firstCallWindowSeconds);
  await s.store.create<Package>({
    apiVersion: 'flint.dev/v1',
    kind: 'Package',
    metadata: { name: 'p', namespace: 'default' },
    spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from(CODE).toString('base64') } },
  } as Package);
  await eventually(() => s.executor.status().pools['default/node'] === 1, 'the pool to hold its one worker');
  return s;
}

/** Functions `<prefix>0` ... of package `p`, created one after another. */
async function createFunctions(store: Store, prefix: string, n: number): Promise<FunctionResource[]> {
  const fns: FunctionResource[] = [];
  for (let i = 0; i < n; i++) {
    fns.push(
      await store.create<FunctionResource>({
        apiVersion: 'flint.dev/v1',
        kind: 'Function',
        metadata: { name: `${prefix}${i}`, namespace: 'default' },
        spec: { environment: { name: 'node' }, package: { packageref: { name: 'p' } } },
      } as FunctionResource),
    );
  }
  return fns;
}

const idle = (x: Setup) => x.executor.status().pools['default/node'];
const instancesOf = (x: Setup, f: FunctionResource) => x.executor.status().functions[`default/${f.metadata.name}`]?.instances ?? 0;

describe('pool growth', () => {
  let x: Setup;
  const budget = new InstanceBudget({ maxInstances: 8, maxMemoryMB: 100_000 });
  before(async () => {
    x = await setUp(budget);
  });
  after(() => x.stop());

  it('a burst grows the pool, up to three quarters of the budget', async () => {
    const fns = await createFunctions(x.store, 'f', 4);
    // Four first calls at once: the pool's one worker, and three process starts.
    const leases = await Promise.all(fns.map((f) => x.executor.acquire(f)));
    for (const l of leases) l.release();
    // The burst took 4: the pool would grow to 4 idle workers, 8 in all with the
    // functions' instances; three quarters of 8 stops it at 6 in all, 2 idle.
    await eventually(() => idle(x) === 2, 'the pool to grow to 2 idle workers');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(idle(x), 2);
    assert.equal(budget.instances, 6);
  });
});

describe('pool growth ahead of first calls', () => {
  let x: Setup;
  before(async () => {
    // Functions created or changed count for 300 s.
    x = await setUp(undefined, 300);
  });
  after(() => x.stop());

  it('new functions each hold a warm worker ready until they are called', async () => {
    const fns = await createFunctions(x.store, 'g', 4);
    // Before any call: the pool's one and one for each new function.
    await eventually(() => idle(x) === 5, 'the pool to grow to 5 idle workers');
    const leases = await Promise.all(fns.map((f) => x.executor.acquire(f)));
    for (const l of leases) l.release();
    assert.deepEqual(
      fns.map((f) => instancesOf(x, f)),
      [1, 1, 1, 1],
    );
    // Called, they no longer count, and their four takes are not remembered as a burst (the pool grew for them
    // already): it keeps its size, one idle worker, rather than starting 3 or 4 more.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(idle(x), 1);
  });
});

describe('pool growth ahead of first calls, within the budget', () => {
  let x: Setup;
  const budget = new InstanceBudget({ maxInstances: 8, maxMemoryMB: 100_000 });
  before(async () => {
    x = await setUp(budget, 300);
  });
  after(() => x.stop());

  it('deploying many functions fills at most three quarters of the budget, and every function still gets an instance', async () => {
    const fns = await createFunctions(x.store, 'h', 20);
    // Twenty expected first calls, but growth stops at 6 of the budget's 8.
    await eventually(() => idle(x) === 6, 'the pool to grow to 6 idle workers');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(idle(x), 6);
    assert.equal(budget.instances, 6);
    // Nine functions called one after another (each released before the next): the warm workers serve six, the
    // rest start in what growth left to functions, reclaiming idle instances once the budget is spent; none fails.
    for (const f of fns.slice(0, 9)) {
      (await x.executor.acquire(f)).release();
      assert.equal(instancesOf(x, f), 1);
    }
    assert.ok(budget.instances <= 8);
    const running = fns.slice(0, 9).reduce((n, f) => n + instancesOf(x, f), 0);
    assert.ok(running >= 7, `${running} of the nine functions' instances still running`);
  });
});
