// The routers' RemoteExecutor and the executor service it leases from, over
// real HTTP on loopback, in front of a real InstanceCore whose backend is a
// fake (instances are names and addresses, started at once or when the test
// says). What is attacked: the warm path costs no request; revocations and
// newer function versions keep old code out of a router's cache; idle grants
// and the grants of a router that went away go back; a failover hands the
// grants in use to the new leader and drops the idle ones while warm calls
// keep being served; and the service refuses what it must, leasing nothing.
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import { pino } from 'pino';
import type { FunctionResource } from '../../api/kinds.ts';
import { eventually } from '../../testing/eventually.ts';
import { InstanceCore } from '../core/instance-core.ts';
import type { CoreInstance, FunctionSlot, InstanceBackend } from '../core/types.ts';
import { ExecutorService, type GrantingExecutor } from './executor-service.ts';
import { PATHS } from './protocol.ts';
import { RemoteExecutor } from './remote-executor.ts';
import { ExecutorServiceClient } from './service-client.ts';

const TOKEN = 'router-token-0123456789';
const logger = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface FakeInstance extends CoreInstance {
  alive: boolean;
}

function instance(id: string, version: string): FakeInstance {
  const now = Date.now();
  const inst: FakeInstance = {
    id,
    address: `${id}.pods:8888`,
    version,
    startedAt: now,
    active: 0,
    served: 0,
    longLived: 0,
    lastUsed: now,
    draining: false,
    alive: true,
    usable: () => inst.alive,
  };
  return inst;
}

let started = 0;

/** Instances are names; a start completes at once, or (gated) when the test opens the gate. */
class FakeBackend implements InstanceBackend<FakeInstance> {
  readonly started: string[] = [];
  readonly stopped: string[] = [];
  /** Instance id -> the version it runs. */
  readonly versions = new Map<string, string>();
  gated = false;
  #gate: Array<() => void> = [];

  async startInstance(slot: FunctionSlot<FakeInstance>, version: string): Promise<FakeInstance> {
    if (this.gated) await new Promise<void>((r) => this.#gate.push(r));
    const inst = instance(`${slot.fn.metadata.name}-${++started}`, version);
    this.started.push(inst.id);
    this.versions.set(inst.id, version);
    return inst;
  }

  /** Lets gated starts complete (in microtasks, before any I/O). */
  open(): void {
    this.gated = false;
    for (const r of this.#gate.splice(0)) r();
  }

  stopInstance(_slot: FunctionSlot<FakeInstance>, inst: FakeInstance): void {
    inst.alive = false;
    this.stopped.push(inst.id);
  }

  versionOf(fn: FunctionResource): string {
    return `${fn.metadata.uid}@${fn.metadata.resourceVersion}`;
  }

  maxInstances(fn: FunctionResource): number {
    return fn.spec.concurrency ?? 10;
  }

  log(): void {}
}

function fnOf(name: string, resourceVersion = '1', spec: Partial<FunctionResource['spec']> = {}): FunctionResource {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Function',
    metadata: { name, namespace: 'default', uid: `uid-${name}`, resourceVersion },
    spec: { environment: { name: 'node' }, package: { packageref: { name: `${name}-pkg` } }, requestsPerPod: 1, ...spec },
  } as FunctionResource;
}

interface Leader {
  identity: string;
  url: string;
  backend: FakeBackend;
  core: InstanceCore<FakeInstance>;
  service: ExecutorService;
  /** Asks of who leads: one or more for every request that got past the token, none for a warm call. */
  asked(): number;
  /** Calls that could lease: acquire and leaseInstance. */
  leasings(): number;
  lead(): void;
  /** Requests under way on the function's instances, at this leader's core. */
  active(name: string): number;
  activeOn(name: string, instanceId: string): number;
  stop(): Promise<void>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

async function startLeader(identity: string, o: { leading?: boolean; sessionGraceMs?: number; onLeaseInstance?: () => void } = {}): Promise<Leader> {
  const backend = new FakeBackend();
  const core = new InstanceCore<FakeInstance>({ backend, queue: { maxLength: 100, timeoutMs: 5000 } });
  let leading = o.leading ?? true;
  let asked = 0;
  let leasings = 0;
  const executor: GrantingExecutor = {
    acquire: (fn, signal) => {
      leasings++;
      return core.acquire(fn, signal);
    },
    leaseInstance: (fn, id) => {
      leasings++;
      o.onLeaseInstance?.();
      return core.leaseInstance(fn, id);
    },
    instances: (ns, name) => core.report(ns, name),
  };
  const service = new ExecutorService({
    host: '127.0.0.1',
    port: 0,
    identity,
    token: TOKEN,
    logger,
    sessionGraceMs: o.sessionGraceMs,
    leader: () => {
      asked++;
      return leading ? executor : undefined;
    },
  });
  const url = await service.start();
  let stopped = false;
  const leader: Leader = {
    identity,
    url,
    backend,
    core,
    service,
    asked: () => asked,
    leasings: () => leasings,
    lead: () => {
      leading = true;
    },
    active: (name) => core.report('default', name).items.reduce((n, i) => n + i.active, 0),
    activeOn: (name, id) => core.report('default', name).items.find((i) => i.name === id)?.active ?? 0,
    async stop() {
      if (stopped) return;
      stopped = true;
      await service.stop();
      core.stop();
    },
  };
  cleanups.push(() => leader.stop());
  return leader;
}

/** A client whose event stream cannot be opened while `blocked`, and can be cut (its requests still reach the leader). */
class StreamlessClient extends ExecutorServiceClient {
  blocked = true;
  #current: AbortController | undefined;

  override async events(router: string, signal: AbortSignal) {
    if (this.blocked) throw new Error('no stream now');
    this.#current = new AbortController();
    return super.events(router, AbortSignal.any([signal, this.#current.signal]));
  }

  cut(): void {
    this.blocked = true;
    this.#current?.abort();
  }
}

async function startRouter(
  leaderUrl: () => string | undefined,
  o: { grantIdleMs?: number; reachMs?: number; id?: string; client?: ExecutorServiceClient } = {},
): Promise<RemoteExecutor> {
  const r = new RemoteExecutor({
    client: o.client ?? new ExecutorServiceClient({ leaderUrl, token: TOKEN, reachMs: o.reachMs ?? 3000 }),
    logger,
    routerId: o.id,
    grantIdleMs: o.grantIdleMs,
  });
  await r.start();
  cleanups.push(() => r.stop());
  return r;
}

async function connected(r: RemoteExecutor, leader: string): Promise<void> {
  await eventually(() => r.held().leader === leader, `the router's event stream at ${leader}`, 5000);
}

describe('RemoteExecutor against the executor service', { timeout: 60_000 }, () => {
  it('serves warm requests from a released grant without asking the leader', async () => {
    const a = await startLeader('a');
    const r = await startRouter(() => a.url);
    await connected(r, 'a');
    const fn = fnOf('warm');
    assert.equal(r.tryAcquire(fn), undefined, 'nothing cached yet');
    const first = await r.acquire(fn);
    assert.equal(first.coldStart, true);
    assert.equal(first.address, `${first.instanceId}.pods:8888`);
    first.release();
    await sleep(50);
    const before = a.asked();
    for (let i = 0; i < 100; i++) {
      const l = r.tryAcquire(fn);
      assert.ok(l, `warm request ${i}`);
      assert.equal(l.instanceId, first.instanceId);
      assert.equal(l.coldStart, false);
      l.release();
    }
    const viaAcquire = await r.acquire(fn);
    assert.equal(viaAcquire.instanceId, first.instanceId);
    viaAcquire.release();
    await sleep(100);
    assert.equal(a.asked(), before, 'no request reached the service for a warm call');
    // The leader leased the instance once: the router holds that one slot.
    const items = a.core.report('default', 'warm').items;
    assert.deepEqual(
      items.map((i) => ({ active: i.active, served: i.served })),
      [{ active: 1, served: 1 }],
    );
    assert.deepEqual(r.held(), { grants: 1, busy: 0, leader: 'a' });
  });

  it('gives revoked grants back when the function changes, and the old instance stops', async () => {
    const a = await startLeader('a');
    const r = await startRouter(() => a.url);
    await connected(r, 'a');
    const v1 = fnOf('roll', '1');
    const l1 = await r.acquire(v1);
    const old = l1.instanceId;
    l1.release();
    assert.equal(r.held().grants, 1);
    // The leader's own watch sees the update: the core rolls, the old instance drains, its grant is revoked.
    a.core.upsertFunction(fnOf('roll', '2'));
    await eventually(() => a.backend.stopped.includes(old), 'the old instance stopped', 5000);
    assert.equal(r.held().grants, 0, 'the revoked grant left the cache');
    // Even a router whose copy is still v1 is not served by the old instance.
    assert.equal(r.tryAcquire(v1), undefined);
    const l2 = await r.acquire(fnOf('roll', '2'));
    assert.notEqual(l2.instanceId, old);
    assert.equal(a.backend.versions.get(l2.instanceId), 'uid-roll@2');
    // A grant in use when its instance drains: its request finishes there, then it goes back and the instance stops.
    a.core.upsertFunction(fnOf('roll', '3'));
    await eventually(() => l2.stale?.() === true, 'the busy grant revoked', 5000);
    await sleep(300);
    assert.ok(!a.backend.stopped.includes(l2.instanceId), 'not stopped under a request');
    assert.equal(a.activeOn('roll', l2.instanceId), 1);
    l2.release();
    await eventually(() => a.backend.stopped.includes(l2.instanceId), 'the drained instance stopped after the request', 5000);
    assert.equal(r.held().grants, 0);
  });

  it('never hands out a grant taken for an older version once the caller passes a newer one', async () => {
    const a = await startLeader('a');
    const r = await startRouter(() => a.url);
    await connected(r, 'a');
    const v5 = fnOf('rv', '5');
    const l = await r.acquire(v5);
    l.release();
    // The router's store saw version 6 before the leader's did: the cached grant is not used, and goes back.
    const before = a.asked();
    assert.equal(r.tryAcquire(fnOf('rv', '6')), undefined);
    await eventually(() => a.active('rv') === 0, 'the old grant given back', 5000);
    assert.equal(a.asked(), before + 1, 'one request: the release');
    assert.equal(r.held().grants, 0);
    assert.equal(r.tryAcquire(v5), undefined, 'and is not there for an older copy either');
    // Grants taken for version 6 are kept for 6, and for the older copy too.
    const l6 = await r.acquire(fnOf('rv', '6'));
    l6.release();
    const again = r.tryAcquire(v5);
    assert.equal(again?.instanceId, l6.instanceId);
    again?.release();
    // Once the rollout is over, nothing on a version-5 instance is handed out.
    await eventually(() => a.core.report('default', 'rv').items.every((i) => i.current), 'the rollout over', 5000);
    await sleep(400);
    for (let i = 0; i < 20; i++) {
      const x = r.tryAcquire(fnOf('rv', '6')) ?? (await r.acquire(fnOf('rv', '6')));
      assert.equal(a.backend.versions.get(x.instanceId), 'uid-rv@6', `request ${i} on ${x.instanceId}`);
      x.release();
    }
  });

  it('gives idle grants back after grantIdleMs, and keeps those in use', async () => {
    const a = await startLeader('a');
    const r = await startRouter(() => a.url, { grantIdleMs: 300 });
    await connected(r, 'a');
    const fn = fnOf('idle');
    const busy = await r.acquire(fn);
    const idle = await r.acquire(fn);
    idle.release();
    assert.equal(a.active('idle'), 2);
    const t0 = Date.now();
    await eventually(() => a.activeOn('idle', idle.instanceId) === 0, 'the idle grant given back', 5000);
    const took = Date.now() - t0;
    assert.ok(took >= 250 && took < 1500, `given back after ${took} ms`);
    assert.deepEqual(r.held(), { grants: 1, busy: 1, leader: 'a' });
    await sleep(600);
    assert.equal(a.activeOn('idle', busy.instanceId), 1, 'the grant in use is kept however long');
    // A grant used more often than the idle period stays.
    busy.release();
    for (let i = 0; i < 8; i++) {
      const l = r.tryAcquire(fn);
      assert.equal(l?.instanceId, busy.instanceId, `use ${i}`);
      l?.release();
      await sleep(100);
    }
    await eventually(() => a.active('idle') === 0 && r.held().grants === 0, 'all given back once unused', 5000);
  });

  it('gives back the grants of a router whose event stream went and did not come back, after the grace', async () => {
    const a = await startLeader('a', { sessionGraceMs: 600 });
    const fn = fnOf('ghost');
    const sessions: string[] = [];
    const open = async () => {
      const ac = new AbortController();
      const res = await fetch(`${a.url}${PATHS.events}?router=ghost`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: ac.signal });
      assert.equal(res.status, 200);
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const { value } = await reader.read();
      const first = JSON.parse(new TextDecoder().decode(value).split('\n')[0]);
      assert.equal(first.leader, 'a');
      sessions.push(first.session);
      return ac;
    };
    let stream = await open();
    const acquire = async () => {
      const res = await post(a.url, PATHS.acquire, { router: 'ghost', fn });
      assert.equal(res.status, 200);
      return res.json as { grant: string };
    };
    await acquire();
    await acquire();
    assert.equal(a.active('ghost'), 2);
    // A blip: the stream comes back within the grace, the grants stay.
    stream.abort();
    await sleep(300);
    stream = await open();
    await sleep(700);
    assert.equal(a.active('ghost'), 2, 'kept across a reconnect');
    assert.equal(sessions[1], sessions[0], 'the same session');
    // Gone for good.
    const t0 = Date.now();
    stream.abort();
    await eventually(() => a.active('ghost') === 0, 'the grants given back', 5000);
    const took = Date.now() - t0;
    assert.ok(took >= 550, `given back after ${took} ms, not before the grace`);
    // Coming back now is a new session: nothing of the old one is held for it.
    (await open()).abort();
    assert.notEqual(sessions[2], sessions[0]);

    // A RemoteExecutor that stops with a request under way: that grant goes back once its stream is gone for the grace.
    const r = await startRouter(() => a.url);
    await connected(r, 'a');
    const held = await r.acquire(fn);
    const free = await r.acquire(fn);
    free.release();
    await r.stop();
    await eventually(() => a.activeOn('ghost', free.instanceId) === 0, 'the idle grant given back at stop', 2000);
    assert.equal(a.activeOn('ghost', held.instanceId), 1, 'the busy one is still leased');
    await eventually(() => a.active('ghost') === 0, 'the busy grant given back after the grace', 5000);
    held.release();
  });

  it('does not lose the leader\'s grant when a grant freed here serves a request the leader is answering', async () => {
    const a = await startLeader('a');
    const r = await startRouter(() => a.url);
    await connected(r, 'a');
    const fn = fnOf('race');
    const l0 = await r.acquire(fn);
    a.backend.gated = true;
    const waiting = r.acquire(fn);
    await eventually(() => a.core.report('default', 'race').starting === 1, 'the leader starting an instance for the request', 5000);
    // The instance comes up as the first request ends here: the freed grant serves the waiting request first.
    a.backend.open();
    l0.release();
    const l1 = await waiting;
    assert.equal(l1.instanceId, l0.instanceId);
    l1.release();
    // Whatever the leader granted meanwhile is either in the router's cache or given back, not held for nobody.
    await eventually(() => a.active('race') === r.held().grants, `the leader's leases (${a.active('race')}) match the router's grants (${r.held().grants})`, 3000);
    await sleep(300);
    assert.equal(a.active('race'), r.held().grants);
  });

  it('drops a request the caller gave up on, leaving nothing leased for it', async () => {
    const a = await startLeader('a');
    const r = await startRouter(() => a.url);
    await connected(r, 'a');
    const fn = fnOf('gaveup');
    a.backend.gated = true;
    const ac = new AbortController();
    const p = r.acquire(fn, ac.signal);
    await eventually(() => a.core.report('default', 'gaveup').starting === 1, 'the leader starting an instance', 5000);
    // Gives up as the instance comes up.
    a.backend.open();
    ac.abort();
    await assert.rejects(p, /aborted/);
    await eventually(() => a.active('gaveup') === r.held().grants, `the leader's leases (${a.active('gaveup')}) match the router's grants (${r.held().grants})`, 3000);
    await sleep(300);
    assert.equal(a.active('gaveup'), r.held().grants);
  });

  describe('failover', () => {
    it('hands the grants in use to the new leader, drops the idle ones, and serves warm calls meanwhile', async () => {
      const a = await startLeader('a');
      const b = await startLeader('b', { leading: false });
      let leaderUrl: string | undefined = a.url;
      const r = await startRouter(() => leaderUrl, { reachMs: 5000 });
      await connected(r, 'a');
      const fn = fnOf('fo');
      const busy = await r.acquire(fn);
      const idle = await r.acquire(fn);
      assert.notEqual(busy.instanceId, idle.instanceId);
      idle.release();
      // B will find the instances A started (the kubernetes executor adopts specialized pods).
      for (const id of [busy.instanceId, idle.instanceId]) b.core.adopt(fn, instance(id, b.backend.versionOf(fn)));
      // A goes; for a while the Lease names nobody.
      await a.stop();
      leaderUrl = undefined;
      const before = b.asked();
      for (let i = 0; i < 20; i++) {
        const w = r.tryAcquire(fn);
        assert.equal(w?.instanceId, idle.instanceId, `warm call ${i} while no leader answers`);
        w?.release();
      }
      const viaAcquire = await Promise.race([r.acquire(fn), sleep(500).then(() => undefined)]);
      assert.equal(viaAcquire?.instanceId, idle.instanceId, 'acquire of a warm function does not wait for a leader');
      viaAcquire?.release();
      // The Lease names B, which is still a standby: 503s, the router keeps asking.
      leaderUrl = b.url;
      await sleep(600);
      assert.equal(r.held().leader, 'a');
      // A warm call that is under way when B takes over.
      const warm = r.tryAcquire(fn);
      assert.equal(warm?.instanceId, idle.instanceId, 'still warm');
      assert.ok(b.asked() > before, 'the router asked B');
      b.lead();
      await connected(r, 'b');
      await eventually(() => b.activeOn('fo', busy.instanceId) === 1 && r.held().grants === 2, 'the busy grants reattached at B', 5000);
      // The warm call's grant (busy at the switch, on the idle instance) was handed over too; nothing else.
      assert.equal(b.activeOn('fo', idle.instanceId), 1);
      assert.deepEqual(r.held(), { grants: 2, busy: 2, leader: 'b' });
      // The grants are B's now: releases and idling reach B's core.
      busy.release('timeout');
      await eventually(() => b.backend.stopped.includes(busy.instanceId), "the timed-out instance stopped by B's core", 5000);
      assert.equal(b.activeOn('fo', busy.instanceId), 0);
      warm?.release();
      assert.equal(r.tryAcquire(fn)?.instanceId, idle.instanceId, 'the handed-over grant is cached as B\'s');
    });

    it('drops the grants idle at the switch without telling the new leader', async () => {
      const a = await startLeader('a');
      const b = await startLeader('b', { leading: false });
      let leaderUrl: string | undefined = a.url;
      const r = await startRouter(() => leaderUrl, { reachMs: 5000 });
      await connected(r, 'a');
      const fn = fnOf('fo2');
      const busy = await r.acquire(fn);
      const idle = await r.acquire(fn);
      idle.release();
      for (const id of [busy.instanceId, idle.instanceId]) b.core.adopt(fn, instance(id, b.backend.versionOf(fn)));
      await a.stop();
      leaderUrl = b.url;
      b.lead();
      await connected(r, 'b');
      await eventually(() => b.activeOn('fo2', busy.instanceId) === 1 && r.held().grants === 1, 'the busy grant reattached at B', 5000);
      assert.equal(b.activeOn('fo2', idle.instanceId), 0, 'the idle grant was not reattached');
      assert.deepEqual(r.held(), { grants: 1, busy: 1, leader: 'b' });
      // The request under way ends: its grant is cached as B's, and serves the next call without a request.
      busy.release();
      const asked = b.asked();
      const next = r.tryAcquire(fn);
      assert.equal(next?.instanceId, busy.instanceId);
      next?.release();
      await sleep(100);
      assert.equal(b.asked(), asked);
      // Stopping the router gives it back to B.
      await r.stop();
      await eventually(() => b.active('fo2') === 0, "the grant given back at B's core", 5000);
    });

    it('gives a grant back to the new leader when its request failed while the grant was being handed over', async () => {
      const a = await startLeader('a');
      let busy: { release(outcome?: 'ok' | 'unreachable' | 'timeout'): void; instanceId: string } | undefined;
      // The request fails (its instance refused the connection) while B takes the grant over.
      const b = await startLeader('b', { leading: false, onLeaseInstance: () => busy?.release('unreachable') });
      let leaderUrl: string | undefined = a.url;
      const r = await startRouter(() => leaderUrl, { reachMs: 5000 });
      await connected(r, 'a');
      const fn = fnOf('fo4');
      busy = await r.acquire(fn);
      const id = busy.instanceId;
      b.core.adopt(fn, instance(id, b.backend.versionOf(fn)));
      await a.stop();
      leaderUrl = b.url;
      b.lead();
      await connected(r, 'b');
      // B hears of the failure: the instance is not trusted with another request, and the router does not keep it.
      await eventually(() => b.backend.stopped.includes(id), "the instance that refused retired by B's core", 5000);
      assert.equal(b.activeOn('fo4', id), 0);
      assert.equal(r.tryAcquire(fn), undefined);
      assert.equal(r.held().grants, 0);
    });

    it('hands over grants taken before its event stream first named a leader', async () => {
      const a = await startLeader('a');
      const b = await startLeader('b', { leading: false });
      let leaderUrl: string | undefined = a.url;
      const client = new StreamlessClient({ leaderUrl: () => leaderUrl, token: TOKEN, reachMs: 5000 });
      const r = await startRouter(() => leaderUrl, { client });
      const fn = fnOf('fo5');
      const busy = await r.acquire(fn);
      const idle = await r.acquire(fn);
      idle.release();
      assert.equal(r.held().leader, '', 'no stream yet');
      for (const id of [busy.instanceId, idle.instanceId]) b.core.adopt(fn, instance(id, b.backend.versionOf(fn)));
      await a.stop();
      leaderUrl = b.url;
      b.lead();
      client.blocked = false;
      await connected(r, 'b');
      await eventually(() => b.activeOn('fo5', busy.instanceId) === 1 && r.held().grants === 1, 'the busy grant handed to B', 5000);
      assert.equal(r.tryAcquire(fn), undefined, "A's idle grant is not used: B never granted it");
      busy.release();
      assert.equal(r.tryAcquire(fn)?.instanceId, busy.instanceId);
    });

    it('hands its grants over again when it comes back to a leader that gave them back (its stream was gone past the grace)', async () => {
      const a = await startLeader('a', { sessionGraceMs: 300 });
      const client = new StreamlessClient({ leaderUrl: () => a.url, token: TOKEN, reachMs: 5000 });
      client.blocked = false;
      const r = await startRouter(() => a.url, { client });
      await connected(r, 'a');
      const fn = fnOf('fo6');
      const busy = await r.acquire(fn);
      const idle = await r.acquire(fn);
      idle.release();
      // Cut off from the leader (its function pods still reachable): the leader takes it for gone.
      client.cut();
      await eventually(() => a.active('fo6') === 0, 'the grants given back by the leader', 5000);
      client.blocked = false;
      // Back: the request under way is accounted for again; the idle grant is not used as if still granted.
      await eventually(() => a.activeOn('fo6', busy.instanceId) === 1 && r.held().grants === 1, 'the busy grant handed over again', 5000);
      assert.equal(a.activeOn('fo6', idle.instanceId), 0);
      assert.equal(r.tryAcquire(fn), undefined);
      busy.release();
      const again = r.tryAcquire(fn);
      assert.equal(again?.instanceId, busy.instanceId);
      again?.release();
      await r.stop();
      await eventually(() => a.active('fo6') === 0, 'given back at stop', 5000);
    });

    it('keeps a grant the new leader cannot take over only until its request ends', async () => {
      const a = await startLeader('a');
      const b = await startLeader('b', { leading: false });
      let leaderUrl: string | undefined = a.url;
      const r = await startRouter(() => leaderUrl, { reachMs: 5000 });
      await connected(r, 'a');
      const fn = fnOf('fo3');
      const busy = await r.acquire(fn);
      // B never heard of that instance.
      await a.stop();
      leaderUrl = b.url;
      b.lead();
      await connected(r, 'b');
      await eventually(() => busy.stale?.() === true, 'the grant revoked', 5000);
      busy.release();
      assert.equal(r.held().grants, 0);
      assert.equal(r.tryAcquire(fn), undefined);
    });
  });

  describe('the service refuses', () => {
    let a: Leader;
    let standby: Leader;
    const fn = fnOf('attacked');
    const nothingLeased = () => {
      assert.equal(a.leasings(), 0, 'nothing asked the core for a lease');
      assert.deepEqual(a.core.report('default', 'attacked').items, []);
    };

    it('requests without the routers\' token: 401, nothing leased', async () => {
      a = await startLeader('a');
      for (const authorization of [undefined, 'Bearer wrong-token', `Basic ${TOKEN}`, `bearer ${TOKEN}`, 'Bearer ', `Bearer  ${TOKEN}`, `Bearer ${TOKEN}x`]) {
        for (const [method, path, body] of [
          ['POST', PATHS.acquire, { router: 'r', fn }],
          ['POST', PATHS.reattach, { router: 'r', grants: [{ fn, instanceId: 'x' }] }],
          ['POST', PATHS.grants, { router: 'r', ops: [] }],
          ['GET', `${PATHS.events}?router=r`, undefined],
          ['GET', `${PATHS.instances}/default/attacked`, undefined],
        ] as const) {
          const res = await send(a.url, method, path, { body, authorization });
          assert.equal(res.status, 401, `${method} ${path} with ${authorization}`);
          assert.equal(res.json?.code, 'FLINT_ERR_UNAUTHORIZED');
          assert.match(res.type, /application\/json/);
        }
      }
      nothingLeased();
      assert.equal(a.asked(), 0);
      const health = await send(a.url, 'GET', PATHS.health, {});
      assert.deepEqual(health.json, { identity: 'a', leader: true });
    });

    it('a standby: 503 with Retry-After', async () => {
      standby = await startLeader('s', { leading: false });
      const res = await post(standby.url, PATHS.acquire, { router: 'r', fn });
      assert.equal(res.status, 503);
      assert.equal(res.json?.code, 'FLINT_ERR_UNAVAILABLE');
      assert.match(res.json?.message, /standby/);
      assert.equal(res.retryAfter, '1');
      assert.equal(standby.leasings(), 0);
    });

    it('malformed bodies: 4xx naming what is wrong, nothing leased', async () => {
      a = await startLeader('a');
      const { uid: _uid, ...noUid } = fn.metadata;
      const cases: Array<[string, unknown, number, RegExp]> = [
        [PATHS.acquire, 'not json {', 400, /not JSON/],
        [PATHS.acquire, '', 400, /not JSON/],
        [PATHS.acquire, null, 400, /router/],
        [PATHS.acquire, [], 400, /router/],
        [PATHS.acquire, { fn }, 400, /router/],
        [PATHS.acquire, { router: 42, fn }, 400, /router/],
        [PATHS.acquire, { router: 'x'.repeat(257), fn }, 400, /router/],
        [PATHS.acquire, { router: 'r' }, 400, /fn\.metadata/],
        [PATHS.acquire, { router: 'r', fn: { ...fn, metadata: noUid } }, 400, /fn\.metadata\.uid/],
        [PATHS.acquire, { router: 'r', fn: { ...fn, metadata: { ...fn.metadata, resourceVersion: 7 } } }, 400, /fn\.metadata\.resourceVersion/],
        [PATHS.acquire, { router: 'r', fn: { metadata: fn.metadata } }, 400, /fn\.spec/],
        [PATHS.grants, { router: 'r', ops: 'release all' }, 400, /ops/],
        [PATHS.grants, { ops: [] }, 400, /router/],
        [PATHS.reattach, { router: 'r', grants: {} }, 400, /grants/],
        [PATHS.reattach, { router: 'r', grants: [null] }, 400, /grants\[0\]\.fn/],
        // One bad entry after good ones: none of them is leased.
        [PATHS.reattach, { router: 'r', grants: [{ fn, instanceId: 'i' }, { fn, instanceId: 'i' }, { fn: { metadata: noUid, spec: {} }, instanceId: 'i' }] }, 400, /grants\[2\]\.fn\.metadata\.uid/],
      ];
      for (const [path, body, status, message] of cases) {
        const res = await send(a.url, 'POST', path, { body, authorization: `Bearer ${TOKEN}` });
        assert.equal(res.status, status, `${path} ${JSON.stringify(body)?.slice(0, 80)}: ${JSON.stringify(res.json)}`);
        assert.match(String(res.json?.message), message, `${path} ${JSON.stringify(body)?.slice(0, 80)}`);
        assert.match(res.type, /application\/json/);
      }
      nothingLeased();
    });

    it('a body over 1 MiB: 413, nothing leased', async () => {
      a = await startLeader('a');
      const big = { router: 'r', fn: { ...fn, spec: { ...fn.spec, env: { X: 'x'.repeat(1.5 * 1024 * 1024) } } } };
      const res = await send(a.url, 'POST', PATHS.acquire, { body: big, authorization: `Bearer ${TOKEN}` });
      assert.equal(res.status, 413);
      assert.equal(res.json?.code, 'FLINT_ERR_PAYLOAD_TOO_LARGE');
      nothingLeased();
      // The service still answers.
      const ok = await post(a.url, PATHS.acquire, { router: 'r', fn });
      assert.equal(ok.status, 200);
    });

    it("releasing another router's grant does nothing", async () => {
      a = await startLeader('a');
      const mine = await post(a.url, PATHS.acquire, { router: 'r1', fn });
      assert.equal(mine.status, 200);
      const grant = (mine.json as { grant: string }).grant;
      assert.equal(a.active('attacked'), 1);
      const theirs = await post(a.url, PATHS.grants, { router: 'r2', ops: [{ grant, op: 'release', outcome: 'timeout' }] });
      assert.equal(theirs.status, 204);
      assert.equal(a.active('attacked'), 1, 'still leased');
      assert.deepEqual(a.backend.stopped, []);
      const own = await post(a.url, PATHS.grants, { router: 'r1', ops: [{ grant, op: 'release', outcome: 'ok' }] });
      assert.equal(own.status, 204);
      assert.equal(a.active('attacked'), 0);
      // Twice: nothing more.
      await post(a.url, PATHS.grants, { router: 'r1', ops: [{ grant, op: 'release', outcome: 'ok' }, null, 7, { op: 'release' }] });
      assert.equal(a.core.report('default', 'attacked').items[0].active, 0);
    });

    it('a grant released before it was granted is given back as soon as it is; a held grant id asked again is that grant', async () => {
      a = await startLeader('a');
      a.backend.gated = true;
      const pending = post(a.url, PATHS.acquire, { router: 'r', fn, grant: 'g-1' });
      await eventually(() => a.core.report('default', 'attacked').starting === 1, 'the acquire waiting for an instance', 5000);
      // The router gave up on it: its release overtakes the grant.
      assert.equal((await post(a.url, PATHS.grants, { router: 'r', ops: [{ grant: 'g-1', op: 'release', outcome: 'ok' }] })).status, 204);
      a.backend.open();
      const late = await pending;
      assert.equal(late.status, 409);
      assert.equal(late.json?.field, 'grant');
      assert.equal(a.active('attacked'), 0, 'the late grant given back');
      // Ids are the router's to choose; asking again for one it holds (a retry that lost its answer) leases nothing more.
      const first = await post(a.url, PATHS.acquire, { router: 'r', fn, grant: 'g-2' });
      assert.equal(first.status, 200);
      assert.equal(first.json.grant, 'g-2');
      const twice = await post(a.url, PATHS.acquire, { router: 'r', fn, grant: 'g-2' });
      assert.equal(twice.status, 200);
      assert.deepEqual(twice.json, first.json);
      assert.equal(a.active('attacked'), 1);
      // The same id from another router is another grant.
      const other = await post(a.url, PATHS.acquire, { router: 'r2', fn, grant: 'g-2' });
      assert.equal(other.status, 200);
      assert.notEqual(other.json.instanceId, first.json.instanceId);
      await post(a.url, PATHS.grants, { router: 'r2', ops: [{ grant: 'g-2', op: 'release', outcome: 'ok' }] });
      assert.equal(a.active('attacked'), 1);
      for (const grant of ['', 'x'.repeat(129), 7]) {
        const bad = await post(a.url, PATHS.acquire, { router: 'r', fn, grant });
        assert.equal(bad.status, 400, JSON.stringify(grant));
        assert.equal(bad.json?.field, 'grant');
      }
      assert.equal(a.active('attacked'), 1);
    });

    it('unknown paths 404, wrong methods 405, before reading any body', async () => {
      a = await startLeader('a');
      const auth = `Bearer ${TOKEN}`;
      for (const [method, path, status] of [
        ['GET', '/v1/executor/nope', 404],
        ['POST', '/v1/executor/nope', 404],
        ['GET', '/', 404],
        ['GET', PATHS.acquire, 405],
        ['PUT', PATHS.acquire, 405],
        ['DELETE', PATHS.grants, 405],
        ['POST', PATHS.events, 405],
        ['POST', `${PATHS.instances}/default/attacked`, 405],
      ] as const) {
        const res = await send(a.url, method, path, { authorization: auth });
        assert.equal(res.status, status, `${method} ${path}: ${JSON.stringify(res.json)}`);
        assert.equal(res.json?.code, status === 404 ? 'FLINT_ERR_NOT_FOUND' : 'FLINT_ERR_METHOD_NOT_ALLOWED', `${method} ${path}`);
      }
      const noRouter = await send(a.url, 'GET', PATHS.events, { authorization: auth });
      assert.equal(noRouter.status, 400);
      assert.match(noRouter.json?.message, /router/);
      const badInstances = await send(a.url, 'GET', `${PATHS.instances}/default`, { authorization: auth });
      assert.equal(badInstances.status, 400);
      nothingLeased();
    });
  });
});

after(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

interface Answer {
  status: number;
  json: any;
  type: string;
  retryAfter: string | null;
}

async function send(base: string, method: string, path: string, o: { body?: unknown; authorization?: string }): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (o.authorization !== undefined) headers.authorization = o.authorization;
  let body: string | undefined;
  if (o.body !== undefined) {
    body = typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
    headers['content-type'] = 'application/json';
  }
  const ac = new AbortController();
  const res = await fetch(base + path, { method, headers, body, signal: ac.signal });
  const type = res.headers.get('content-type') ?? '';
  // An event stream answers and stays open: read nothing of it.
  if (type.includes('ndjson')) {
    ac.abort();
    return { status: res.status, json: undefined, type, retryAfter: null };
  }
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text;
  }
  return { status: res.status, json, type, retryAfter: res.headers.get('retry-after') };
}

const post = (base: string, path: string, body: unknown) => send(base, 'POST', path, { body, authorization: `Bearer ${TOKEN}` });
