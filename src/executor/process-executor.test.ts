// The process executor with real (unsandboxed) Node workers: how a draining
// instance treats long-lived connections next to ordinary requests.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Environment, FunctionResource, Package } from '../api/kinds.ts';
import { LocalArchiveStore } from '../archive/index.ts';
import { dataLayout, functionLogFile } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { eventually } from '../testing/eventually.ts';
import { unixRequest } from './process/unix-http.ts';
import { createProcessExecutor, type ProcessExecutor } from './process-executor.ts';
import type { Lease } from './types.ts';

// `/?ms=N` answers after N ms.
const CODE = `module.exports = async (ctx) => {
  await new Promise((r) => setTimeout(r, Number(ctx.request.query.ms ?? 0)));
  return { status: 200, body: 'done' };
};`;
const LIMIT_MS = 400;

let root: string;
let store: Store;
let executor: ProcessExecutor;
const layout = () => dataLayout(root);

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-pe-'));
  store = openSqliteStore(layout().db);
  await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'node', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 0, terminationGracePeriod: 5 } } as Environment);
  const literal = Buffer.from(CODE).toString('base64');
  await store.create<Package>({ apiVersion: 'flint.dev/v1', kind: 'Package', metadata: { name: 'slow-pkg', namespace: 'default' }, spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal } } } as Package);
  executor = createProcessExecutor({
    store,
    layout: layout(),
    logger: pino({ level: 'silent' }),
    sandbox: 'none',
    memoryMB: 128,
    poolSize: 2,
    reapIntervalMs: 60_000,
    archives: new LocalArchiveStore(layout().archives),
    longLivedDrainMs: LIMIT_MS,
  });
  await executor.start();
});

after(async () => {
  await executor.stop();
  await store.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function createFunction(name: string): Promise<FunctionResource> {
  return store.create<FunctionResource>({
    apiVersion: 'flint.dev/v1',
    kind: 'Function',
    metadata: { name, namespace: 'default' },
    spec: { environment: { name: 'node' }, package: { packageref: { name: 'slow-pkg' } }, requestsPerPod: 10 },
  } as FunctionResource);
}

/** A new generation of the function: its instances start draining. */
async function update(fn: FunctionResource): Promise<FunctionResource> {
  const current = (await store.get('Function', 'default', fn.metadata.name))!;
  return store.update({ ...current, spec: { ...current.spec, functionTimeout: (current.spec.functionTimeout ?? 60) + 1 } });
}

const instances = (name: string) => executor.status().functions[`default/${name}`]?.instances ?? 0;
const log = (name: string) => fs.readFileSync(functionLogFile(layout(), 'default', name), 'utf8');
/** Function log lines are written asynchronously: wait for one. */
const logged = (name: string, line: RegExp) => eventually(() => line.test(log(name)), `${line} in the log of ${name}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A new function whose one instance holds a long-lived lease (a WebSocket's), then a change to the function so that
 * instance drains once an instance of the new version replaces it. `meanwhile` runs between the lease and the change.
 */
async function drainingWithLongLived(name: string, meanwhile?: (fn: FunctionResource, lease: Lease) => Promise<void>): Promise<Lease> {
  const fn = await createFunction(name);
  const lease = await executor.acquire(fn);
  lease.markLongLived?.();
  await meanwhile?.(fn, lease);
  await update(fn);
  await logged(name, /replaced by one of the new version; it drains/);
  return lease;
}

describe('process executor: warm pools', () => {
  it("keeps the install's poolSize of warm workers for an environment that sets no poolsize, and its own poolsize otherwise", async () => {
    const pools = () => executor.status().pools;
    await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'unsized', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' } } } as Environment);
    await eventually(() => pools()['default/unsized'] === 2, "two warm workers (the executor's poolSize)");
    const env = (await store.get('Environment', 'default', 'unsized')) as Environment;
    await store.update({ ...env, spec: { ...env.spec, poolsize: 1 } });
    await eventually(() => pools()['default/unsized'] === 1, "one warm worker (the environment's poolsize)");
    assert.equal(pools()['default/node'], 0, 'poolsize 0 keeps none');
    await store.delete('Environment', 'default', 'unsized');
  });
});

describe('process executor: draining with long-lived connections', () => {
  it('stops a draining instance that holds only long-lived connections once the limit has passed', async () => {
    const lease = await drainingWithLongLived('ws-only');
    assert.equal(instances('ws-only'), 2, 'the old instance is kept while its long-lived connection is within the limit, beside its replacement');
    await eventually(() => instances('ws-only') === 1, 'the draining instance to be stopped');
    await logged('ws-only', /stopped \(draining, with only long-lived connections left after 0\.4 s\)/);
    lease.release();
  });

  it('lets an ordinary request on a draining instance run past the limit, and applies the limit once it ends', async () => {
    let reqLease: Lease | undefined;
    let slow: Promise<unknown> | undefined;
    const wsLease = await drainingWithLongLived('mixed', async (fn, lease) => {
      reqLease = await executor.acquire(fn);
      assert.equal(reqLease.instanceId, lease.instanceId, 'both leases are on the one instance');
      slow = unixRequest(reqLease.socketPath!, 'GET', `/?ms=${LIMIT_MS * 4}`, { timeoutMs: 20_000 });
    });
    await sleep(LIMIT_MS * 2);
    assert.equal(instances('mixed'), 2, 'an instance with an ordinary request under way is not stopped by the long-lived limit');
    assert.doesNotMatch(log('mixed'), /stopped/);
    const reply = await slow;
    assert.deepEqual(reply, { status: 200, text: 'done' });
    reqLease!.release();
    assert.equal(instances('mixed'), 2, 'the limit starts when the ordinary request ends, not before');
    await eventually(() => instances('mixed') === 1, 'the draining instance to be stopped after the limit');
    await logged('mixed', /only long-lived connections left/);
    wsLease.release();
  });

  it('stops a draining instance at once when its last connection closes, long-lived or not', async () => {
    const lease = await drainingWithLongLived('closing');
    lease.release();
    assert.equal(instances('closing'), 1, 'only the replacement is left');
    await logged('closing', /stopped \(drained\)/);
  });
});

describe('process executor: rolling updates', () => {
  const ids = (leases: Lease[]) => leases.map((l) => l.instanceId);

  const onePerRequest = (name: string) =>
    store.create<FunctionResource>({
      apiVersion: 'flint.dev/v1',
      kind: 'Function',
      metadata: { name, namespace: 'default' },
      spec: { environment: { name: 'node' }, package: { packageref: { name: 'slow-pkg' } }, requestsPerPod: 1 },
    } as FunctionResource);
  const replaced = (name: string) => (log(name).match(/replaced by one of the new version/g) ?? []).length;

  it('keeps idle old instances taking requests until a new one is ready, then replaces them all with as many as the load needs', async () => {
    const fn = await onePerRequest('rolling');
    const first = [await executor.acquire(fn), await executor.acquire(fn)];
    const old = new Set(ids(first));
    assert.equal(old.size, 2);
    for (const l of first) l.release();
    await update(fn);
    await logged('rolling', /function changed: new instances are started/);
    // Right after the change a request is served at once, by whichever is free: an old instance or a replacement.
    const now = executor.tryAcquire(fn);
    assert.ok(now, 'a request finds an instance without waiting for a specialization');
    now.release();
    await eventually(() => replaced('rolling') === 2, 'both old instances replaced');
    await eventually(() => instances('rolling') === 1, 'one new instance: nothing was running on the old ones');
    const after = executor.tryAcquire(fn);
    assert.ok(after && !old.has(after.instanceId), 'requests now go to the new version');
    after.release();
  });

  it('replaces busy old instances one for one, each once a new one has a slot for its requests', async () => {
    const fn = await onePerRequest('rolling-busy');
    const held = [await executor.acquire(fn), await executor.acquire(fn)];
    const old = new Set(ids(held));
    await update(fn);
    await eventually(() => replaced('rolling-busy') === 2, 'both busy old instances replaced');
    assert.equal(instances('rolling-busy'), 4, 'two new instances beside the two old ones still finishing their requests');
    for (const l of held) l.release();
    await eventually(() => instances('rolling-busy') === 2, 'the old ones stopped once their requests ended');
    const a = executor.tryAcquire(fn);
    const b = executor.tryAcquire(fn);
    assert.ok(a && b && !old.has(a.instanceId) && !old.has(b.instanceId));
    a.release();
    b.release();
  });

  it('finishes the rollout when the function changes again while a replacement is being specialized', async () => {
    const fn = await createFunction('twice');
    const lease = await executor.acquire(fn);
    const old = lease.instanceId;
    lease.release();
    await update(fn);
    await update(fn);
    await eventually(() => (log('twice').match(/function changed/g) ?? []).length === 2, 'both changes to reach the executor');
    await eventually(() => new RegExp(`instance ${old} replaced by one of the new version`).test(log('twice')), 'the old instance replaced');
    await eventually(() => instances('twice') === 1, 'one instance, of the newest version');
    const now = executor.tryAcquire(fn);
    assert.ok(now && now.instanceId !== old);
    now.release();
  });

  it('moves traffic to the new version at once when it fails to start, so its error is seen', async () => {
    await store.create<Package>({
      apiVersion: 'flint.dev/v1',
      kind: 'Package',
      metadata: { name: 'broken-pkg', namespace: 'default' },
      spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from('module.exports = async () => {').toString('base64') } },
    } as Package);
    const fn = await createFunction('breaking');
    (await executor.acquire(fn)).release();
    const current = (await store.get('Function', 'default', 'breaking')) as FunctionResource;
    await store.update({ ...current, spec: { ...current.spec, package: { packageref: { name: 'broken-pkg' } } } });
    await logged('breaking', /specialization failed/);
    await eventually(() => instances('breaking') === 0, 'the old instance drained');
    const latest = (await store.get('Function', 'default', 'breaking')) as FunctionResource;
    await assert.rejects(executor.acquire(latest), (err: Error & { code?: string }) => err.code === 'FLINT_ERR_SPECIALIZE_FAILED');
  });
});
