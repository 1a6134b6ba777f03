// The process executor's instance budget and bounded queues, with real
// (unsandboxed) Node workers: what a request gets when the budget is spent
// or a function's queue is full, and how idle instances make room.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { FlintError } from '../api/errors.ts';
import type { Environment, FunctionResource, Package } from '../api/kinds.ts';
import { LocalArchiveStore } from '../archive/index.ts';
import { dataLayout, functionLogFile } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { eventually } from '../testing/eventually.ts';
import { budgetLimits, InstanceBudget } from './instance-budget.ts';
import { createProcessExecutor, type ProcessExecutor } from './process-executor.ts';
import type { Lease } from './types.ts';

const CODE = 'module.exports = async () => ({ status: 200, body: "ok" });';

let root: string;
let store: Store;
let executor: ProcessExecutor;
const budget = new InstanceBudget({ maxInstances: 2, maxMemoryMB: 10_000 });

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-budget-'));
  const layout = dataLayout(root);
  store = openSqliteStore(layout.db);
  await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'node', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 0, terminationGracePeriod: 2 } } as Environment);
  await store.create<Package>({
    apiVersion: 'flint.dev/v1',
    kind: 'Package',
    metadata: { name: 'p', namespace: 'default' },
    spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from(CODE).toString('base64') } },
  } as Package);
  executor = createProcessExecutor({
    store,
    layout,
    logger: pino({ level: 'silent' }),
    sandbox: 'none',
    memoryMB: 128,
    poolSize: 0,
    reapIntervalMs: 60_000,
    archives: new LocalArchiveStore(layout.archives),
    budget,
    queue: { maxLength: 2, timeoutMs: 300 },
  });
  await executor.start();
});

after(async () => {
  await executor.stop();
  await store.close();
  fs.rmSync(root, { recursive: true, force: true });
});

function createFunction(name: string, spec: Partial<FunctionResource['spec']> = {}): Promise<FunctionResource> {
  return store.create<FunctionResource>({
    apiVersion: 'flint.dev/v1',
    kind: 'Function',
    metadata: { name, namespace: 'default' },
    spec: { environment: { name: 'node' }, package: { packageref: { name: 'p' } }, ...spec },
  } as FunctionResource);
}

const instances = (name: string) => executor.status().functions[`default/${name}`]?.instances ?? 0;

async function refused(p: Promise<Lease>): Promise<FlintError> {
  try {
    const lease = await p;
    lease.release();
  } catch (err) {
    return err as FlintError;
  }
  assert.fail('the acquire was expected to be refused');
}

describe('instance budget', () => {
  it('derives its limits from the machine when the values leave them at 0', () => {
    assert.deepEqual(budgetLimits({ maxInstances: 0, maxMemoryMB: 0 }, 256, 8 * 1024 ** 3), { maxInstances: 24, maxMemoryMB: 6144 });
    assert.deepEqual(budgetLimits({ maxInstances: 5, maxMemoryMB: 0 }, 256, 8 * 1024 ** 3), { maxInstances: 5, maxMemoryMB: 6144 });
    assert.deepEqual(budgetLimits({ maxInstances: 0, maxMemoryMB: 1000 }, 256, 8 * 1024 ** 3), { maxInstances: 3, maxMemoryMB: 1000 });
  });

  it('counts instances and memory, refuses past either, and wakes waiters on a release', async () => {
    const b = new InstanceBudget({ maxInstances: 3, maxMemoryMB: 300 });
    const a = b.reserve(200);
    assert.ok(a);
    assert.equal(b.reserve(200), undefined, 'over the memory');
    assert.match(b.describe(200), /200 of executor\.maxMemoryMB=300 MB are in use and an instance needs 200 MB/);
    const woken = b.nextRelease();
    a.release();
    a.release();
    await woken;
    assert.equal(b.memoryMB, 0);
    assert.equal(b.instances, 0);
  });

  it('answers 503 with Retry-After naming the spent budget, then stops an idle instance of another function to make room', async () => {
    const busy = await createFunction('busy');
    const other = await createFunction('other');
    const held = [await executor.acquire(busy), await executor.acquire(busy)];
    assert.equal(instances('busy'), 2);
    assert.equal(budget.instances, 2);
    const err = await refused(executor.acquire(other));
    assert.equal(err.code, 'FLINT_ERR_UNAVAILABLE');
    assert.equal(err.retryAfterSeconds, 1);
    assert.match(err.message, /no instance of function 'other' could be started within 0\.3 s: the instance budget is spent \(all 2 instances of executor\.maxInstances are in use\)/);
    for (const l of held) l.release();
    const lease = await executor.acquire(other);
    assert.equal(instances('other'), 1);
    assert.equal(instances('busy'), 1, 'one idle instance of the other function was stopped for it');
    assert.ok(budget.instances <= 2);
    lease.release();
    await eventually(() => /reclaimed for function 'other': the instance budget is spent/.test(fs.readFileSync(functionLogFile(dataLayout(root), 'default', 'busy'), 'utf8')), 'the reclaim in the log');
    await store.delete('Function', 'default', 'busy');
    await store.delete('Function', 'default', 'other');
    await eventually(() => budget.instances === 0, 'the deleted functions\' workers to exit');
  });

  it('bounds a function\'s queue in length and in wait: 429 with Retry-After past either', async () => {
    const one = await createFunction('one', { concurrency: 1 });
    const lease = await executor.acquire(one);
    const waiting = [refused(executor.acquire(one)), refused(executor.acquire(one))];
    const full = await refused(executor.acquire(one));
    assert.equal(full.code, 'FLINT_ERR_TOO_MANY_REQUESTS');
    assert.equal(full.retryAfterSeconds, 1);
    assert.match(full.message, /all 1 it may have are busy and 2 requests are already waiting \(executor\.maxQueueLength\)/);
    for (const e of await Promise.all(waiting)) {
      assert.equal(e.code, 'FLINT_ERR_TOO_MANY_REQUESTS');
      assert.match(e.message, /waited 0\.3 s \(executor\.queueTimeoutSeconds\)/);
    }
    lease.release();
    (await executor.acquire(one)).release();
  });
});
