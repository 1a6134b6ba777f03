// The instance-and-lease core both executors share: for every function, its
// specialized instances and the requests waiting for one. A request takes a
// free slot of an instance of the function's current version; without one it
// waits in a bounded queue (executor.maxQueueLength, queueTimeoutSeconds),
// and instances are started while waiting requests outnumber the slots on
// the way, up to the function's maximum. A new version rolls: instances of it
// are started for the load the old ones carry, and old ones drain once new
// free slots can take what they hold. Idle instances are reaped; newdeploy
// functions keep minScale. Backends (the process executor, the kubernetes
// executor) start, specialize and stop instances; everything else is here,
// once.
import { FlintError } from '../../api/errors.ts';
import type { InstancesReport } from '../../api/instances.ts';
import type { FunctionResource } from '../../api/kinds.ts';
import type { Lease } from '../types.ts';
import { type CoreInstance, type FunctionSlot, type InstanceBackend, START_ABANDONED, type StartReason } from './types.ts';

/** What a 429 for a full queue, or a 503 for a spent budget, asks the client to wait, in seconds. */
export const RETRY_AFTER_S = 1;
const DEFAULT_QUEUE = { maxLength: 1000, timeoutMs: 10_000 };
/** Instances of a new version started at once during a rolling update. */
const ROLL_SURGE = 4;
const LONG_LIVED_DRAIN_MS = 10_000;
/** After a failed start, how long before a newdeploy function's minScale is started again. */
const WARM_RETRY_MS = 30_000;

export interface InstanceCoreOptions<I extends CoreInstance> {
  backend: InstanceBackend<I>;
  /** Requests waiting for one function's instances: how many at most, and how long one waits for a free slot. */
  queue?: { maxLength: number; timeoutMs: number };
  /** How long a draining instance that holds only long-lived connections keeps them. */
  longLivedDrainMs?: number;
}

interface Waiter {
  resolve(lease: Lease): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
  /** The wait was extended once for a specialization under way. */
  extended: boolean;
}

class Slot<I extends CoreInstance> implements FunctionSlot<I> {
  readonly key: string;
  fn: FunctionResource;
  version: string;
  readonly instances = new Set<I>();
  starting = 0;
  blocked = 0;
  roomWait = new AbortController();
  readonly waiters: Waiter[] = [];
  /** After a failed start, minScale is not kept again before this (epoch ms): a broken function does not churn. */
  warmAfter = 0;

  constructor(key: string, fn: FunctionResource, version: string) {
    this.key = key;
    this.fn = fn;
    this.version = version;
  }

  get waiting(): number {
    return this.waiters.length;
  }
}

export const slotKey = (ns: string, name: string) => `${ns}/${name}`;

/**
 * A function's slot key, made once per resource object: the router asks
 * with the same object on every request, and a key built anew each time
 * costs a string and its hash before either map lookup.
 */
const keysOf = new WeakMap<FunctionResource, string>();
function keyOf(fn: FunctionResource): string {
  let key = keysOf.get(fn);
  if (key === undefined) {
    key = slotKey(fn.metadata.namespace, fn.metadata.name);
    keysOf.set(fn, key);
  }
  return key;
}

export function isNewdeploy(fn: FunctionResource): boolean {
  return fn.spec.invokeStrategy?.executionStrategy?.executorType === 'newdeploy';
}

/** The instances a newdeploy function keeps however idle. */
export function minScaleOf(fn: FunctionResource): number {
  return isNewdeploy(fn) ? (fn.spec.invokeStrategy?.executionStrategy?.minScale ?? 1) : 0;
}

export class InstanceCore<I extends CoreInstance> {
  readonly #b: InstanceBackend<I>;
  readonly #queue: { maxLength: number; timeoutMs: number };
  readonly #longLivedDrainMs: number;
  readonly #slots = new Map<string, Slot<I>>();
  /** The newest copy of every function the executor's own watch delivered. */
  readonly #functions = new Map<string, FunctionResource>();
  /**
   * Uids of functions deleted since start, so a request that raced the delete (a router's copy, or one asked over
   * the network after the watch delivered the deletion) is refused instead of bringing the function back.
   */
  readonly #deleted = new Set<string>();
  #stopped = false;

  constructor(o: InstanceCoreOptions<I>) {
    this.#b = o.backend;
    this.#queue = o.queue ?? DEFAULT_QUEUE;
    this.#longLivedDrainMs = o.longLivedDrainMs ?? LONG_LIVED_DRAIN_MS;
  }

  // ---- what the executor's watches tell it ------------------------------------------------

  /** A function created or changed: a newer version rolls, a newdeploy function gets its minScale. */
  upsertFunction(fn: FunctionResource): void {
    const key = slotKey(fn.metadata.namespace, fn.metadata.name);
    this.#functions.set(key, fn);
    const st = this.#slots.get(key);
    if (st && st.fn.metadata.uid === fn.metadata.uid && Number(fn.metadata.resourceVersion) > Number(st.fn.metadata.resourceVersion)) {
      st.fn = fn;
      this.refresh(st);
    }
    if (isNewdeploy(fn)) this.#ensureMinScale(this.#slot(fn));
  }

  deleteFunction(fn: FunctionResource): void {
    const key = slotKey(fn.metadata.namespace, fn.metadata.name);
    this.#functions.delete(key);
    this.#deleted.add(fn.metadata.uid);
    // Bounded: the oldest tombstones go first (a set iterates in insertion order).
    if (this.#deleted.size > 10_000) this.#deleted.delete(this.#deleted.values().next().value as string);
    const st = this.#slots.get(key);
    if (!st) return;
    this.#slots.delete(key);
    for (const w of st.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new FlintError('FLINT_ERR_NOT_FOUND', `function '${fn.metadata.name}' was deleted`));
    }
    this.#drainAll(st);
  }

  /** Functions whose version may have changed (a package, an environment): those that did roll. */
  refreshAll(): void {
    for (const st of this.#slots.values()) this.refresh(st);
  }

  /**
   * A new function or package version. Its instances are started at once,
   * and the old ones keep taking requests until instances of the new version
   * are ready to take over their load (a rolling update, at most ROLL_SURGE
   * starts at a time): a request never waits for a specialization just
   * because the code changed. New requests prefer an instance of the new
   * version as soon as one is ready.
   */
  refresh(st: FunctionSlot<I>): void {
    const slot = st as Slot<I>;
    const v = this.#b.versionOf(slot.fn);
    if (v === slot.version) return;
    slot.version = v;
    // New code may start where the old failed.
    slot.warmAfter = 0;
    this.#b.log(slot.fn, 'function changed: new instances are started; old ones serve until new ones can take their load, then drain');
    if (isNewdeploy(slot.fn)) this.#ensureMinScale(slot);
    this.#rollOn(slot);
    this.#dispatch(slot);
  }

  /**
   * An instance the backend found already specialized at `inst.version` (one an earlier executor left): it serves
   * the function's requests from now on, as if this core had started it.
   */
  adopt(fn: FunctionResource, inst: I): void {
    const st = this.#current(fn);
    st.instances.add(inst);
    this.#dispatch(st);
  }

  /**
   * A slot on one named instance of `fn` (a router that held leases on it
   * from an earlier executor, after a failover), if it still serves the
   * function's current version and has room; undefined otherwise.
   */
  leaseInstance(fn: FunctionResource, instanceId: string): Lease | undefined {
    if (this.#stopped || this.#deleted.has(fn.metadata.uid)) return undefined;
    const st = this.#current(fn);
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    for (const inst of st.instances) {
      if (inst.id !== instanceId) continue;
      if (inst.draining || inst.version !== st.version || inst.active >= rpp || !inst.usable()) return undefined;
      return this.#lease(st, inst, false);
    }
    return undefined;
  }

  /** Whether the slot is still its function's (not deleted or replaced by a new function of the same name). */
  isLive(st: FunctionSlot<I>): boolean {
    return this.#slots.get(st.key) === st;
  }

  /** Every slot, for a backend's own bookkeeping (pods gone behind its back, resizing). */
  slots(): Iterable<FunctionSlot<I>> {
    return this.#slots.values();
  }

  /** Stops taking requests: waiting ones are refused. Returns every instance, for the backend to stop. */
  stop(): I[] {
    this.#stopped = true;
    const all: I[] = [];
    for (const st of this.#slots.values()) {
      for (const w of st.waiters.splice(0)) {
        clearTimeout(w.timer);
        w.reject(new FlintError('FLINT_ERR_UNAVAILABLE', 'the executor is stopping'));
      }
      for (const inst of st.instances) {
        clearTimeout(inst.drainDeadline);
        all.push(inst);
      }
    }
    return all;
  }

  /** Requests under way on any instance. */
  busy(): boolean {
    for (const st of this.#slots.values()) for (const inst of st.instances) if (inst.active > 0) return true;
    return false;
  }

  // ---- reports ---------------------------------------------------------------------------

  status(): Record<string, { instances: number; starting: number }> {
    const out: Record<string, { instances: number; starting: number }> = {};
    for (const [k, st] of this.#slots) out[k] = { instances: st.instances.size, starting: st.starting };
    return out;
  }

  /** A function's instances, for `flint fn pods`. */
  report(namespace: string, name: string): Omit<InstancesReport, 'budget'> {
    const st = this.#slots.get(slotKey(namespace, name));
    const now = Date.now();
    const items = [...(st?.instances ?? [])].map((inst) => ({
      name: inst.id,
      state: inst.draining ? ('draining' as const) : ('ready' as const),
      current: inst.version === st?.version,
      active: inst.active,
      served: inst.served,
      ageSeconds: Math.floor((now - inst.startedAt) / 1000),
      idleSeconds: inst.active > 0 ? 0 : Math.floor((now - inst.lastUsed) / 1000),
    }));
    return { items, starting: st?.starting ?? 0 };
  }

  /**
   * The least recently used idle instance of a function other than `except`,
   * beyond what newdeploy functions keep: what may be stopped to make room.
   */
  leastRecentlyUsedIdle(except: FunctionSlot<I>): { slot: FunctionSlot<I>; inst: I } | undefined {
    let lru: { slot: Slot<I>; inst: I } | undefined;
    for (const other of this.#slots.values()) {
      if (other === except) continue;
      let live = 0;
      for (const inst of other.instances) if (!inst.draining) live++;
      if (live <= minScaleOf(other.fn)) continue;
      for (const inst of other.instances) {
        if (inst.active === 0 && !inst.draining && (!lru || inst.lastUsed < lru.inst.lastUsed)) lru = { slot: other, inst };
      }
    }
    return lru;
  }

  // ---- instances -------------------------------------------------------------------------

  /** An instance stopped behind the core's back (its process exited, its pod went): it is forgotten and replaced on demand. */
  instanceLost(st: FunctionSlot<I>, inst: I, why: string): void {
    const slot = st as Slot<I>;
    clearTimeout(inst.drainDeadline);
    if (!slot.instances.delete(inst)) return;
    this.#b.log(slot.fn, `instance ${inst.id} ${why}; it will be replaced on demand`);
    if (this.#stopped) return;
    if (isNewdeploy(slot.fn)) this.#ensureMinScale(slot);
    this.#scale(slot);
  }

  /** Takes an instance out of service: it finishes what it serves, then stops. */
  drain(st: FunctionSlot<I>, inst: I): void {
    const slot = st as Slot<I>;
    inst.draining = true;
    if (inst.active === 0) this.retire(slot, inst, 'drained');
    else this.#limitLongLived(slot, inst);
  }

  retire(st: FunctionSlot<I>, inst: I, why: string): void {
    const slot = st as Slot<I>;
    clearTimeout(inst.drainDeadline);
    if (!slot.instances.delete(inst)) return;
    this.#b.log(slot.fn, `instance ${inst.id} stopped (${why})`);
    this.#b.stopInstance(slot, inst, why, why === 'timeout');
  }

  /** Idle instances past the function's idletimeout stop; newdeploy functions keep minScale. */
  reap(now = Date.now()): void {
    for (const st of this.#slots.values()) {
      const idleMs = (st.fn.spec.idletimeout ?? 120) * 1000;
      let live = 0;
      for (const inst of st.instances) if (!inst.draining) live++;
      for (const inst of st.instances) {
        if (inst.active > 0) continue;
        if (inst.draining) this.retire(st, inst, 'drained');
        else if (live > minScaleOf(st.fn) && now - inst.lastUsed > idleMs) {
          this.retire(st, inst, `idle for ${st.fn.spec.idletimeout ?? 120} s`);
          live--;
        }
      }
      if (isNewdeploy(st.fn)) this.#ensureMinScale(st);
    }
  }

  #slot(fn: FunctionResource): Slot<I> {
    const key = keyOf(fn);
    let st = this.#slots.get(key);
    if (!st || st.fn.metadata.uid !== fn.metadata.uid) {
      if (st) this.#drainAll(st);
      st = new Slot<I>(key, fn, this.#b.versionOf(fn));
      this.#slots.set(key, st);
    }
    return st;
  }

  /** The slot of `fn`, moved on to the newer of the caller's copy and the executor's own. */
  #current(fn: FunctionResource): Slot<I> {
    // The caller's copy may lag behind the executor's own watch, or lead it.
    const known = this.#functions.get(keyOf(fn));
    if (known && known.metadata.uid === fn.metadata.uid && Number(known.metadata.resourceVersion) > Number(fn.metadata.resourceVersion)) fn = known;
    const st = this.#slot(fn);
    if (Number(fn.metadata.resourceVersion) > Number(st.fn.metadata.resourceVersion)) {
      st.fn = fn;
      this.refresh(st);
    }
    return st;
  }

  /** Instances of an older version that still take requests. */
  #outdated(st: Slot<I>): I[] {
    const out: I[] = [];
    for (const inst of st.instances) if (!inst.draining && inst.version !== st.version) out.push(inst);
    return out;
  }

  /**
   * One step of a rollout: old instances whose requests the current
   * version's free slots can take drain now (all of them, when one new
   * instance is enough for the load); for the rest, instances of the current
   * version are started, as many as their load needs, ROLL_SURGE at a time.
   * Replacing every old instance one for one would start a process per old
   * instance at each update, where the load may need one.
   */
  #rollOn(st: Slot<I>): void {
    if (this.#stopped) return;
    this.#drainCovered(st);
    const left = this.#outdated(st);
    if (left.length === 0) return;
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    let load = 0;
    for (const inst of left) load += inst.active;
    const needed = Math.max(1, Math.ceil(load / rpp));
    while (st.starting < Math.min(ROLL_SURGE, needed)) this.#startInstance(st, 'rollout');
  }

  /** Drains old instances, least busy first, while the current version's free slots can take what they carry. */
  #drainCovered(st: Slot<I>): void {
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    let free = 0;
    let current = 0;
    for (const inst of st.instances) {
      if (inst.draining || inst.version !== st.version) continue;
      current++;
      free += Math.max(0, rpp - inst.active);
    }
    if (current === 0) return;
    for (const inst of this.#outdated(st).sort((a, b) => a.active - b.active)) {
      if (inst.active > free) break;
      free -= inst.active;
      this.#b.log(st.fn, `instance ${inst.id} replaced by one of the new version; it drains`);
      this.drain(st, inst);
    }
  }

  /** The new version failed to start: traffic moves to it anyway, so its error is seen rather than the old code kept. */
  #endRollout(st: Slot<I>): void {
    for (const inst of this.#outdated(st)) this.drain(st, inst);
  }

  /**
   * Requests, however long, finish on a draining instance; long-lived
   * connections (WebSockets) would keep old or deleted code running for as
   * long as their clients like. Once they are all it holds, it is stopped
   * shortly: the runtime tells its WebSockets it is going away (1001), and
   * clients reconnect to the new code.
   */
  #limitLongLived(st: Slot<I>, inst: I): void {
    if (!inst.draining || inst.active === 0 || inst.active !== inst.longLived || inst.drainDeadline !== undefined) return;
    const ms = this.#longLivedDrainMs;
    inst.drainDeadline = setTimeout(() => this.retire(st, inst, `draining, with only long-lived connections left after ${ms / 1000} s`), ms);
    inst.drainDeadline.unref();
  }

  #drainAll(st: Slot<I>): void {
    for (const inst of st.instances) this.drain(st, inst);
  }

  #ensureMinScale(st: Slot<I>): void {
    if (this.#stopped || this.#slots.get(st.key) !== st || st.warmAfter > Date.now()) return;
    const min = minScaleOf(st.fn);
    for (let n = this.#liveCurrent(st) + st.starting; n < min; n++) this.#startInstance(st, 'minScale');
  }

  // ---- acquiring -------------------------------------------------------------------------

  tryAcquire(fn: FunctionResource): Lease | undefined {
    if (this.#stopped || this.#deleted.has(fn.metadata.uid)) return undefined;
    const st = this.#current(fn);
    const ready = this.#freeInstance(st);
    return ready === undefined ? undefined : this.#lease(st, ready, false);
  }

  acquire(fn: FunctionResource, signal?: AbortSignal): Promise<Lease> {
    if (this.#stopped) return Promise.reject(new FlintError('FLINT_ERR_UNAVAILABLE', 'the executor is stopping'));
    if (this.#deleted.has(fn.metadata.uid)) return Promise.reject(new FlintError('FLINT_ERR_NOT_FOUND', `function '${fn.metadata.name}' was deleted`));
    const st = this.#current(fn);
    const ready = this.#freeInstance(st);
    if (ready) return Promise.resolve(this.#lease(st, ready, false));
    if (st.waiters.length >= this.#queue.maxLength) return Promise.reject(this.#queueFull(st, `${this.#queue.maxLength} requests are already waiting (executor.maxQueueLength)`));
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        extended: false,
        // A request waits for a free slot at most the queue's timeout; one an instance is being specialized for waits for that too.
        timer: setTimeout(() => this.#waitedTooLong(st, waiter), this.#queue.timeoutMs),
      };
      signal?.addEventListener(
        'abort',
        () => {
          if (this.#removeWaiter(st, waiter)) reject(new FlintError('FLINT_ERR_UNAVAILABLE', 'request aborted'));
        },
        { once: true },
      );
      st.waiters.push(waiter);
      this.#scale(st);
    });
  }

  #waitedTooLong(st: Slot<I>, waiter: Waiter): void {
    const i = st.waiters.indexOf(waiter);
    if (i < 0) return;
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    const specializing = st.starting - st.blocked;
    if (!waiter.extended && i < specializing * rpp) {
      // An instance for it is being specialized: that has a deadline of its own.
      waiter.extended = true;
      waiter.timer = setTimeout(() => this.#waitedTooLong(st, waiter), (st.fn.spec.invokeStrategy?.executionStrategy?.specializationTimeout ?? 120) * 1000);
      return;
    }
    this.#removeWaiter(st, waiter);
    const timeoutS = this.#queue.timeoutMs / 1000;
    const roomError = st.blocked > 0 ? this.#b.roomError?.(st, timeoutS) : undefined;
    waiter.reject(roomError ?? this.#queueFull(st, `waited ${timeoutS} s (executor.queueTimeoutSeconds)`));
  }

  #queueFull(st: Slot<I>, why: string): FlintError {
    return new FlintError('FLINT_ERR_TOO_MANY_REQUESTS', `function '${st.fn.metadata.name}' has no free instance: all ${this.#b.maxInstances(st.fn)} it may have are busy and ${why}`, {
      retryAfterSeconds: RETRY_AFTER_S,
    });
  }

  #removeWaiter(st: Slot<I>, w: Waiter): boolean {
    const i = st.waiters.indexOf(w);
    if (i < 0) return false;
    st.waiters.splice(i, 1);
    clearTimeout(w.timer);
    // Nobody left to serve: starts waiting for room give up.
    if (st.waiters.length === 0 && st.blocked > 0) st.roomWait.abort();
    return true;
  }

  #freeInstance(st: Slot<I>): I | undefined {
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    let best: I | undefined;
    let old: I | undefined;
    for (const inst of st.instances) {
      if (inst.draining || inst.active >= rpp || !inst.usable()) continue;
      if (inst.version !== st.version) {
        // During a rollout: taken only when no instance of the new version is free.
        if (!old || inst.active < old.active) old = inst;
      } else if (!best || inst.active < best.active) best = inst;
    }
    return best ?? old;
  }

  /** Instances of the current version that take requests. */
  #liveCurrent(st: Slot<I>): number {
    let live = 0;
    for (const inst of st.instances) if (!inst.draining && inst.version === st.version) live++;
    return live;
  }

  /** Starts instances while waiting requests outnumber the slots on the way. */
  #scale(st: Slot<I>): void {
    if (this.#stopped) return;
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    const max = this.#b.maxInstances(st.fn);
    while (st.waiters.length > st.starting * rpp) {
      if (this.#liveCurrent(st) + st.starting >= max) break;
      this.#startInstance(st, 'demand');
    }
  }

  #startInstance(st: Slot<I>, why: StartReason): void {
    st.starting++;
    const version = st.version;
    void this.#b.startInstance(st, version, why).then(
      (inst) => {
        st.starting--;
        if (this.#slots.get(st.key) !== st || this.#stopped) {
          this.#b.stopInstance(st, inst, 'not needed any more', true);
          return;
        }
        st.instances.add(inst);
        this.#b.log(st.fn, `instance ${inst.id} specialized`);
        // The function changed again while this one specialized: it goes, and the rollout starts one of the newest.
        if (version !== st.version) this.drain(st, inst);
        this.#rollOn(st);
        this.#dispatch(st, inst);
      },
      (err) => {
        st.starting--;
        if (err === START_ABANDONED) {
          // Nobody waited for it any more; requests that came since get a start of their own.
          if (st.starting === 0) this.#endRollout(st);
          this.#scale(st);
          return;
        }
        this.#endRollout(st);
        st.warmAfter = Date.now() + WARM_RETRY_MS;
        const e = err instanceof FlintError ? err : new FlintError('FLINT_ERR_SPECIALIZE_FAILED', String((err as Error)?.message ?? err));
        this.#b.log(st.fn, `specialization failed: ${e.message}`);
        // Requests counting on this instance fail with its error, unless another instance is on the way or ready for them.
        const capacity = st.starting * (st.fn.spec.requestsPerPod ?? 1);
        while (st.waiters.length > capacity && !this.#freeInstance(st)) {
          const w = st.waiters.pop() as Waiter;
          clearTimeout(w.timer);
          w.reject(e);
        }
        this.#dispatch(st);
      },
    );
  }

  /** Hands free slots to waiting requests, oldest first. */
  #dispatch(st: Slot<I>, fresh?: I): void {
    let first = fresh;
    while (st.waiters.length > 0) {
      const inst = first && first.active < (st.fn.spec.requestsPerPod ?? 1) && !first.draining ? first : this.#freeInstance(st);
      if (!inst) break;
      const w = st.waiters.shift() as Waiter;
      clearTimeout(w.timer);
      w.resolve(this.#lease(st, inst, inst === fresh && inst.served === 0));
      first = inst === fresh ? fresh : undefined;
    }
    if (st.waiters.length > 0) this.#scale(st);
  }

  #lease(st: Slot<I>, inst: I, coldStart: boolean): Lease {
    inst.active++;
    inst.served++;
    let released = false;
    let longLived = false;
    return {
      socketPath: inst.socketPath,
      address: inst.address,
      instanceId: inst.id,
      coldStart,
      // Also while requests wait for the function: a holder keeping it idle (a router's cache) would starve them.
      stale: () => inst.draining || !st.instances.has(inst) || !inst.usable() || st.waiters.length > 0,
      markLongLived: () => {
        if (released || longLived) return;
        longLived = true;
        inst.longLived++;
        this.#limitLongLived(st, inst);
      },
      release: (outcome = 'ok') => {
        if (released) return;
        released = true;
        inst.active--;
        if (longLived) inst.longLived--;
        inst.lastUsed = Date.now();
        if (outcome === 'timeout') {
          this.#b.log(st.fn, `instance ${inst.id} exceeded the function timeout and is replaced`);
          this.retire(st, inst, 'timeout');
        } else if (outcome === 'unreachable' && !inst.usable()) {
          this.instanceLost(st, inst, 'stopped answering');
        } else if (outcome === 'unreachable') {
          // It answered once and now refuses: it is not to be trusted with the next request.
          this.drain(st, inst);
        } else if (st.fn.spec.onceOnly) {
          this.retire(st, inst, 'onceOnly');
        } else if (inst.draining && inst.active === 0) {
          this.retire(st, inst, 'drained');
        } else {
          this.#limitLongLived(st, inst);
        }
        this.#dispatch(st);
      },
    };
  }
}
