// The contract every executor backend meets, through the Executor interface
// alone: a lease reaches an instance running the function's current code;
// concurrent requests beyond requestsPerPod scale it out up to its
// concurrency and no further; the queue is bounded in length and in wait,
// with 429 and Retry-After past either; an update moves new requests to new
// code while old leases finish on the old; a deleted function's waiting
// requests are refused; code that does not load fails its requests with the
// reason. A backend's test calls runExecutorContract with a harness: the
// process executor's with workers, the kubernetes executor's on a real
// control plane.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FunctionResource, Package } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';
import type { Executor, Lease } from './types.ts';

export interface ExecutorHarness {
  store: Store;
  executor: Executor;
  /** The environment functions run in (namespace default), already created. */
  environment: string;
  /** GET `path` from the leased instance. */
  call(lease: Lease, path: string): Promise<{ status: number; text: string }>;
  stop(): Promise<void>;
}

export interface ContractOptions {
  /** Starts a backend whose queue holds at most `queue.maxLength` requests, each for at most `queue.timeoutMs`. */
  setup(queue: { maxLength: number; timeoutMs: number }): Promise<ExecutorHarness>;
  /** Per case; a cluster needs longer than processes. */
  timeoutMs?: number;
}

/** Answers its version; `?ms=N` answers after N ms. */
const code = (version: string) => `module.exports = async (ctx) => {
  await new Promise((r) => setTimeout(r, Number(ctx.request.query.ms ?? 0)));
  return { status: 200, body: '${version}' };
};\n`;

const QUEUE = { maxLength: 2, timeoutMs: 1500 };

export function runExecutorContract(name: string, o: ContractOptions): void {
  describe(`executor contract: ${name}`, { timeout: (o.timeoutMs ?? 30_000) * 8 }, () => {
    let h: ExecutorHarness;
    const timeout = o.timeoutMs ?? 30_000;

    before(async () => {
      h = await o.setup(QUEUE);
    });
    after(async () => {
      await h?.stop();
    });

    async function deploy(fnName: string, version: string, spec: Partial<FunctionResource['spec']> = {}): Promise<FunctionResource> {
      await h.store.create<Package>({
        apiVersion: 'flint.dev/v1',
        kind: 'Package',
        metadata: { name: `${fnName}-pkg`, namespace: 'default' },
        spec: { environment: { name: h.environment }, deployment: { type: 'literal', literal: Buffer.from(code(version)).toString('base64') } },
      } as Package);
      return h.store.create<FunctionResource>({
        apiVersion: 'flint.dev/v1',
        kind: 'Function',
        metadata: { name: fnName, namespace: 'default' },
        spec: { environment: { name: h.environment }, package: { packageref: { name: `${fnName}-pkg` } }, requestsPerPod: 1, ...spec },
      } as FunctionResource);
    }

    async function replaceCode(fnName: string, version: string): Promise<void> {
      const pkg = (await h.store.get('Package', 'default', `${fnName}-pkg`)) as Package;
      await h.store.update<Package>({ ...pkg, spec: { ...pkg.spec, deployment: { type: 'literal', literal: Buffer.from(code(version)).toString('base64') } } });
    }

    /** The function as the store has it now (the router's copy). */
    const current = async (fn: FunctionResource) => (await h.store.get('Function', 'default', fn.metadata.name)) as FunctionResource;

    it('leases an instance that runs the function, cold first and warm after', { timeout }, async () => {
      const fn = await deploy('hello', 'v1');
      const first = await h.executor.acquire(fn);
      assert.equal(first.coldStart, true);
      assert.deepEqual(await h.call(first, '/'), { status: 200, text: 'v1' });
      first.release();
      const warm = h.executor.tryAcquire(fn);
      assert.ok(warm, 'a warm instance without waiting');
      assert.equal(warm.coldStart, false);
      assert.equal(warm.instanceId, first.instanceId);
      warm.release();
    });

    it('scales out while requests outnumber requestsPerPod, up to concurrency and no further', { timeout }, async () => {
      const fn = await deploy('wide', 'v1', { concurrency: 2 });
      const [a, b] = await Promise.all([h.executor.acquire(fn), h.executor.acquire(fn)]);
      assert.notEqual(a.instanceId, b.instanceId, 'two requests at once, two instances');
      const third = h.executor.acquire(fn);
      a.release();
      const c = await third;
      assert.ok([a.instanceId, b.instanceId].includes(c.instanceId), 'the third waits for one of the two rather than a third instance');
      b.release();
      c.release();
    });

    it('bounds the queue: past its length, and past its wait, 429 with Retry-After', { timeout }, async () => {
      const fn = await deploy('narrow', 'v1', { concurrency: 1 });
      const held = await h.executor.acquire(fn);
      const timedOut = Array.from({ length: QUEUE.maxLength }, () =>
        assert.rejects(h.executor.acquire(fn), (err: any) => err.code === 'FLINT_ERR_TOO_MANY_REQUESTS' && err.retryAfterSeconds > 0 && /queueTimeoutSeconds/.test(err.message)),
      );
      await assert.rejects(h.executor.acquire(fn), (err: any) => err.code === 'FLINT_ERR_TOO_MANY_REQUESTS' && err.retryAfterSeconds > 0 && /maxQueueLength/.test(err.message));
      await Promise.all(timedOut);
      held.release();
    });

    it("moves new requests to new code on an update while old leases finish on the old", { timeout }, async () => {
      const fn = await deploy('rolling', 'v1');
      const old = await h.executor.acquire(fn);
      const slow = h.call(old, '/?ms=1500');
      await replaceCode('rolling', 'v2');
      let fresh: Lease | undefined;
      const deadline = Date.now() + timeout / 2;
      // The executor learns of the new package from its own watch: ask until it has.
      for (;;) {
        const lease = await h.executor.acquire(await current(fn));
        const r = await h.call(lease, '/');
        if (r.text === 'v2') {
          fresh = lease;
          break;
        }
        lease.release();
        assert.ok(Date.now() < deadline, 'the new code within the deadline');
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.notEqual(fresh.instanceId, old.instanceId);
      assert.deepEqual(await slow, { status: 200, text: 'v1' }, 'the old lease finished on the old code');
      old.release();
      fresh.release();
    });

    it("refuses a deleted function's waiting requests", { timeout }, async () => {
      const fn = await deploy('doomed', 'v1', { concurrency: 1 });
      const held = await h.executor.acquire(fn);
      // Watched for at once: the refusal may come before the delete call returns.
      const refused = assert.rejects(h.executor.acquire(fn), (err: any) => err.code === 'FLINT_ERR_NOT_FOUND');
      await h.store.delete('Function', 'default', 'doomed');
      await refused;
      held.release();
    });

    it('fails the requests of code that does not load, with the reason', { timeout }, async () => {
      await h.store.create<Package>({
        apiVersion: 'flint.dev/v1',
        kind: 'Package',
        metadata: { name: 'broken-pkg', namespace: 'default' },
        spec: { environment: { name: h.environment }, deployment: { type: 'literal', literal: Buffer.from('module.exports = ;\n').toString('base64') } },
      } as Package);
      const fn = await h.store.create<FunctionResource>({
        apiVersion: 'flint.dev/v1',
        kind: 'Function',
        metadata: { name: 'broken', namespace: 'default' },
        spec: { environment: { name: h.environment }, package: { packageref: { name: 'broken-pkg' } } },
      } as FunctionResource);
      await assert.rejects(h.executor.acquire(fn), (err: any) => err.code === 'FLINT_ERR_SPECIALIZE_FAILED');
    });
  });
}
