// The local executor: function instances are sandboxed worker processes.
// poolmgr functions specialize a warm worker of their environment's pool on
// first use; newdeploy functions keep minScale..maxScale dedicated instances.
// Both scale out when concurrent requests exceed requestsPerPod per instance,
// are reaped when idle, and switch to new instances when the function or its
// package changes while the old ones drain.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { InstancesReport } from '../api/instances.ts';
import { FlintError } from '../api/errors.ts';
import { runtimeForImage } from '../api/images.ts';
import type { Environment, FunctionResource, Package } from '../api/kinds.ts';
import { type ArchiveStore, isZipFile } from '../archive/index.ts';
import { archiveShas } from '../archive/refs.ts';
import { resolveArchive } from '../archive/resolve.ts';
import type { DataLayout } from '../config/layout.ts';
import type { EgressProvider } from '../sandbox/egress.ts';
import type { Store, Watch } from '../store/store.ts';
import { DeployCache } from './deploy-cache.ts';
import { EnvPool } from './env-pool.ts';
import { FunctionLogs } from './function-log.ts';
import type { InstanceBudget, Reservation } from './instance-budget.ts';
import { type CodeSource, materialize } from './materialize.ts';
import { startWorker, type WorkerHandle } from './process/worker-process.ts';
import type { Executor, Lease } from './types.ts';

export interface ProcessExecutorOptions {
  store: Store;
  layout: DataLayout;
  logger: Logger;
  sandbox: 'bubblewrap' | 'none';
  /** Network namespaces of sandboxed workers whose environment allows external network. */
  egress?: EgressProvider;
  /** Heap cap (MB) of a worker whose environment sets no memory limit. */
  memoryMB: number;
  /** Warm workers of an environment that sets no poolsize. */
  poolSize: number;
  reapIntervalMs: number;
  archives: ArchiveStore;
  /** Cap on an unpacked deployment archive (default 2 GiB). */
  maxUnpackedBytes?: number;
  /** How long a draining instance that holds only long-lived connections keeps them (default 10 s; shorter in tests). */
  longLivedDrainMs?: number;
  /** Workers (and their memory) for all functions together; unbounded when absent. */
  budget?: InstanceBudget;
  /** Requests waiting for one function's instances: how many at most, and how long one waits for a free slot (default 1000, 10 s). */
  queue?: { maxLength: number; timeoutMs: number };
}

/** What a 429 or 503 for a full queue or a spent budget asks the client to wait, in seconds. */
const RETRY_AFTER_S = 1;
const DEFAULT_QUEUE = { maxLength: 1000, timeoutMs: 10_000 };
/** Instances of a new version started at once during a rolling update. */
const ROLL_SURGE = 4;
/** A start that waited for the budget gives up: no request waits for it any more, or the function is gone. */
const BUDGET_WAIT_ABANDONED = new Error('no request waits for this instance any more');

const LONG_LIVED_DRAIN_MS = 10_000;

interface Instance {
  id: string;
  worker: WorkerHandle;
  /** When it was specialized (epoch ms). */
  startedAt: number;
  version: string;
  active: number;
  lastUsed: number;
  draining: boolean;
  served: number;
  /** Leases that became long-lived connections (WebSockets). */
  longLived: number;
  /** Set while draining with only long-lived connections left: stops the instance then. */
  drainDeadline?: NodeJS.Timeout;
}

interface Waiter {
  resolve(lease: Lease): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
  /** The wait was extended once for a specialization under way. */
  extended: boolean;
}

interface FnState {
  key: string;
  fn: FunctionResource;
  version: string;
  instances: Set<Instance>;
  starting: number;
  /** Of `starting`, those waiting for the instance budget rather than specializing. */
  budgetBlocked: number;
  /** Aborted when no request waits any more: starts blocked on the budget give up. */
  budgetWait: AbortController;
  waiters: Waiter[];
}

const fnKey = (ns: string, name: string) => `${ns}/${name}`;

function memoryOf(env: Environment, fallback: number): number {
  const mem = env.spec.resources?.limits?.memory;
  if (mem === undefined) return fallback;
  const m = /^([0-9.]+)(Ki|Mi|Gi|k|M|G)?$/.exec(String(mem));
  if (!m) return fallback;
  const n = Number(m[1]);
  const mb = { Ki: n / 1024, k: n / 1000, Mi: n, M: n, Gi: n * 1024, G: n * 1000 }[m[2] ?? ''] ?? n / (1024 * 1024);
  return Math.max(16, Math.floor(mb));
}

/** resources.limits.cpu in thousandths of a core (`500m`, `0.5`, `2`), or undefined for no cap. */
export function cpuMillisOf(env: Environment): number | undefined {
  const cpu = env.spec.resources?.limits?.cpu;
  if (cpu === undefined) return undefined;
  const m = /^([0-9.]+)(m)?$/.exec(String(cpu));
  if (!m) return undefined;
  const millis = m[2] ? Number(m[1]) : Number(m[1]) * 1000;
  return millis > 0 ? Math.ceil(millis) : undefined;
}

export class ProcessExecutor implements Executor {
  readonly #o: ProcessExecutorOptions;
  readonly #log: Logger;
  readonly #logs: FunctionLogs;
  readonly #pools = new Map<string, EnvPool>();
  readonly #fns = new Map<string, FnState>();
  readonly #packages = new Map<string, Package>();
  readonly #functions = new Map<string, FunctionResource>();
  readonly #watches: Watch[] = [];
  #reaper: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Function instances looking for room in the budget right now. */
  #budgetDemand = 0;

  readonly #code: CodeSource;

  constructor(opts: ProcessExecutorOptions) {
    this.#o = opts;
    this.#log = opts.logger;
    this.#logs = new FunctionLogs(opts.layout, (namespace, name, err) => this.#log.error({ namespace, fn: name, err: err.message }, "refusing to write this function's log: its file or directory is not the server's own"));
    this.#code = { store: opts.store, archives: opts.archives, deployCache: new DeployCache(opts.layout.deployCache, opts.maxUnpackedBytes ?? 2 * 1024 ** 3) };
  }

  async start(): Promise<void> {
    const { store } = this.#o;
    const envs = await store.list('Environment');
    for (const env of envs.items) this.#upsertEnv(env);
    const pkgs = await store.list('Package');
    for (const p of pkgs.items) this.#packages.set(fnKey(p.metadata.namespace, p.metadata.name), p);
    const fns = await store.list('Function');
    for (const f of fns.items) this.#upsertFunction(f);
    this.#watches.push(
      store.watch({ kind: 'Environment', sinceResourceVersion: envs.resourceVersion }, (ev) => {
        const env = ev.object as Environment;
        if (ev.type === 'DELETED') this.#deleteEnv(env);
        else this.#upsertEnv(env);
      }),
      store.watch({ kind: 'Package', sinceResourceVersion: pkgs.resourceVersion }, (ev) => {
        const key = fnKey(ev.object.metadata.namespace, ev.object.metadata.name);
        if (ev.type === 'DELETED') this.#packages.delete(key);
        else this.#packages.set(key, ev.object as Package);
        this.#code.deployCache.retain(new Set([...this.#packages.values()].flatMap((p) => archiveShas(p.spec.deployment))));
        if (ev.type !== 'DELETED') this.#prefetch(ev.object as Package);
        // Functions using this package move to instances of the new code.
        for (const st of this.#fns.values()) {
          const ref = st.fn.spec.package.packageref;
          if (fnKey(ref.namespace ?? st.fn.metadata.namespace, ref.name) === key) this.#refreshVersion(st);
        }
      }),
      store.watch({ kind: 'Function', sinceResourceVersion: fns.resourceVersion }, (ev) => {
        const fn = ev.object as FunctionResource;
        if (ev.type === 'DELETED') this.#deleteFunction(fn);
        else this.#upsertFunction(fn);
      }),
    );
    this.#reaper = setInterval(() => this.#reap(), this.#o.reapIntervalMs);
    this.#reaper.unref();
  }

  #stopping: Promise<void> | undefined = undefined;

  /** Stops every worker (they finish what they have); later calls wait for the first. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    this.#stopped = true;
    for (const w of this.#watches.splice(0)) w.close();
    if (this.#reaper) clearInterval(this.#reaper);
    const kills: Promise<void>[] = [];
    for (const pool of this.#pools.values()) kills.push(pool.close());
    for (const st of this.#fns.values()) {
      for (const w of st.waiters.splice(0)) {
        clearTimeout(w.timer);
        w.reject(new FlintError('FLINT_ERR_UNAVAILABLE', 'the executor is stopping'));
      }
      for (const inst of st.instances) {
        clearTimeout(inst.drainDeadline);
        kills.push(inst.worker.kill());
      }
    }
    await Promise.all(kills);
    await this.#logs.closeAll();
  }

  /** Counts for tests and status: instances of a function, warm workers of an environment. */
  status(): { functions: Record<string, { instances: number; starting: number }>; pools: Record<string, number> } {
    const functions: Record<string, { instances: number; starting: number }> = {};
    for (const [k, st] of this.#fns) functions[k] = { instances: st.instances.size, starting: st.starting };
    const pools: Record<string, number> = {};
    for (const [k, p] of this.#pools) pools[k] = p.idleCount;
    return { functions, pools };
  }

  /** A function's instances and the budget, for `flint fn pods` (GET .../functions/{name}/instances). */
  instances(namespace: string, name: string): InstancesReport {
    const st = this.#fns.get(fnKey(namespace, name));
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
    const b = this.#o.budget;
    const budget = b && { instances: b.instances, maxInstances: b.limits.maxInstances, memoryMB: b.memoryMB, maxMemoryMB: b.limits.maxMemoryMB };
    return budget ? { items, starting: st?.starting ?? 0, budget } : { items, starting: st?.starting ?? 0 };
  }

  // ---- environments ------------------------------------------------------------

  #upsertEnv(env: Environment): void {
    const key = fnKey(env.metadata.namespace, env.metadata.name);
    const existing = this.#pools.get(key);
    if (existing) {
      if (JSON.stringify(existing.env.spec) !== JSON.stringify(env.spec)) void existing.update(env);
      else existing.env = env;
      return;
    }
    // Warm workers wait while a function's instance waits for the budget: they would take the room it is freeing.
    const hasRoom = (e: Environment) => this.#budgetDemand === 0 && (this.#o.budget?.fits(memoryOf(e, this.#o.memoryMB)) ?? true);
    const pool = new EnvPool(env, this.#o.poolSize, (e) => this.#startPoolWorker(e), this.#log, hasRoom);
    this.#pools.set(key, pool);
    pool.refill();
  }

  #deleteEnv(env: Environment): void {
    const key = fnKey(env.metadata.namespace, env.metadata.name);
    void this.#pools.get(key)?.close();
    this.#pools.delete(key);
  }

  /** A warm worker for an environment's pool; the pool asks first whether the budget has room. */
  #startPoolWorker(env: Environment): Promise<WorkerHandle> {
    const reservation = this.#o.budget?.reserve(memoryOf(env, this.#o.memoryMB));
    if (this.#o.budget && !reservation) return Promise.reject(new FlintError('FLINT_ERR_UNAVAILABLE', this.#o.budget.describe(memoryOf(env, this.#o.memoryMB))));
    return this.#startWorker(env, reservation, undefined, true);
  }

  #startWorker(env: Environment, reservation: Reservation | undefined, sink?: (line: string, stream: 'stdout' | 'stderr') => void, background = false): Promise<WorkerHandle> {
    const runtime = runtimeForImage(env.spec.runtime.image);
    if (!runtime) {
      reservation?.release();
      throw new FlintError('FLINT_ERR_VALIDATION', `environment '${env.metadata.name}' has an image no runtime serves`);
    }
    const id = `${env.metadata.name}-${randomBytes(4).toString('hex')}`;
    const instanceDir = path.join(this.#o.layout.instances, id);
    const box = { sink };
    const handle = startWorker({
      id,
      runtime,
      instanceDir,
      sandbox: this.#o.sandbox,
      allowNetwork: env.spec.allowAccessToExternalNetwork === true,
      egress: this.#o.egress,
      memoryMB: memoryOf(env, this.#o.memoryMB),
      // SIGTERM, then this long to finish before SIGKILL, as a pod's terminationGracePeriodSeconds.
      killGraceMs: (env.spec.terminationGracePeriod ?? 90) * 1000,
      cpuMillis: cpuMillisOf(env),
      env: env.spec.runtime.env,
      // Raising a priority back needs root: elsewhere a warm worker starts at the normal one.
      background: background && process.getuid?.() === 0,
      onOutput: (line, stream) => (box.sink ?? outputSinks.get(id))?.(line, stream),
    });
    return handle.then(
      (w) => {
        void w.exited.then(() => {
          outputSinks.delete(id);
          fs.rmSync(instanceDir, { recursive: true, force: true });
          this.#budgetFreed(reservation);
        });
        return w;
      },
      (err) => {
        this.#budgetFreed(reservation);
        throw err;
      },
    );
  }

  /** A worker is gone: its share of the budget goes back, and pools short of workers may refill. */
  #budgetFreed(reservation: Reservation | undefined): void {
    if (!reservation) return;
    reservation.release();
    if (this.#stopped) return;
    for (const pool of this.#pools.values()) pool.refill();
  }

  /**
   * A new worker for a function's instance within the budget: when it is
   * spent, an idle warm worker of another environment is stopped to make
   * room, else the least recently used idle instance of another function;
   * with neither, the start waits for a release until no request waits for
   * it any more.
   */
  async #startBudgetedWorker(st: FnState, env: Environment, sink: (line: string, stream: 'stdout' | 'stderr') => void): Promise<WorkerHandle> {
    const budget = this.#o.budget;
    if (!budget) return this.#startWorker(env, undefined, sink);
    const mb = memoryOf(env, this.#o.memoryMB);
    const first = budget.reserve(mb);
    if (first) return this.#startWorker(env, first, sink);
    this.#budgetDemand++;
    try {
      return await this.#waitForBudget(st, env, mb, sink);
    } finally {
      if (--this.#budgetDemand === 0 && !this.#stopped) for (const pool of this.#pools.values()) pool.refill();
    }
  }

  async #waitForBudget(st: FnState, env: Environment, mb: number, sink: (line: string, stream: 'stdout' | 'stderr') => void): Promise<WorkerHandle> {
    const budget = this.#o.budget as InstanceBudget;
    for (;;) {
      const reservation = budget.reserve(mb);
      if (reservation) return this.#startWorker(env, reservation, sink);
      const victim = this.#reclaimable(st);
      if (victim) {
        await victim;
        continue;
      }
      if (st.waiters.length === 0 && !this.#isNewdeploy(st.fn)) throw BUDGET_WAIT_ABANDONED;
      st.budgetBlocked++;
      try {
        await budget.nextRelease(st.budgetWait.signal);
      } finally {
        st.budgetBlocked--;
      }
      if (this.#stopped || this.#fns.get(st.key) !== st) throw BUDGET_WAIT_ABANDONED;
      if (st.budgetWait.signal.aborted) {
        st.budgetWait = new AbortController();
        if (st.waiters.length === 0) throw BUDGET_WAIT_ABANDONED;
      }
    }
  }

  /** Stops something idle that is not `st`'s, to free budget; resolves when it has exited. */
  #reclaimable(st: FnState): Promise<void> | undefined {
    for (const pool of this.#pools.values()) {
      const w = pool.evictIdle();
      if (w) return w.kill(0);
    }
    let lru: { st: FnState; inst: Instance } | undefined;
    for (const other of this.#fns.values()) {
      if (other === st) continue;
      const keep = this.#isNewdeploy(other.fn) ? (other.fn.spec.invokeStrategy?.executionStrategy?.minScale ?? 1) : 0;
      let live = 0;
      for (const inst of other.instances) if (!inst.draining) live++;
      if (live <= keep) continue;
      for (const inst of other.instances) {
        if (inst.active === 0 && !inst.draining && (!lru || inst.lastUsed < lru.inst.lastUsed)) lru = { st: other, inst };
      }
    }
    if (!lru) return undefined;
    const { st: owner, inst } = lru;
    this.#retire(owner, inst, `reclaimed for function '${st.fn.metadata.name}': the instance budget is spent`);
    return inst.worker.exited.then(() => {});
  }

  // ---- functions -----------------------------------------------------------------

  #versionOf(fn: FunctionResource): string {
    const ref = fn.spec.package.packageref;
    const pkg = this.#packages.get(fnKey(ref.namespace ?? fn.metadata.namespace, ref.name));
    // The code, not the package's resourceVersion: a build's status and log updates are no reason to drain.
    return `${fn.metadata.uid}:${fn.metadata.resourceVersion}:${pkg ? (archiveShas(pkg.spec.deployment)[0] ?? 'none') : '-'}`;
  }

  /**
   * New code of a package some function uses is unpacked now, in the
   * background, so that the first request after a build does not wait for it.
   */
  #prefetch(pkg: Package): void {
    const deployment = pkg.spec.deployment;
    if (!deployment) return;
    const used = [...this.#functions.values()].some((f) => {
      const ref = f.spec.package.packageref;
      return ref.name === pkg.metadata.name && (ref.namespace ?? f.metadata.namespace) === pkg.metadata.namespace;
    });
    const envRef = pkg.spec.environment;
    if (!used || this.#pools.get(fnKey(envRef.namespace ?? pkg.metadata.namespace, envRef.name))?.env.spec.keeparchive) return;
    void resolveArchive(this.#o.archives, deployment)
      .then(async (r) => {
        if (await isZipFile(r.path)) await this.#code.deployCache.warm(r.sha256, r.path);
      })
      .catch((err) => this.#log.warn({ err, package: pkg.metadata.name }, 'unpacking a deployment ahead of its first request failed; it will be tried again then'));
  }

  #state(fn: FunctionResource): FnState {
    const key = fnKey(fn.metadata.namespace, fn.metadata.name);
    let st = this.#fns.get(key);
    if (!st || st.fn.metadata.uid !== fn.metadata.uid) {
      if (st) this.#drainAll(st);
      st = { key, fn, version: this.#versionOf(fn), instances: new Set(), starting: 0, budgetBlocked: 0, budgetWait: new AbortController(), waiters: [] };
      this.#fns.set(key, st);
    }
    return st;
  }

  #upsertFunction(fn: FunctionResource): void {
    this.#functions.set(fnKey(fn.metadata.namespace, fn.metadata.name), fn);
    const ref = fn.spec.package.packageref;
    const pkg = this.#packages.get(fnKey(ref.namespace ?? fn.metadata.namespace, ref.name));
    if (pkg) this.#prefetch(pkg);
    const st = this.#fns.get(fnKey(fn.metadata.namespace, fn.metadata.name));
    if (st && st.fn.metadata.uid === fn.metadata.uid && Number(fn.metadata.resourceVersion) > Number(st.fn.metadata.resourceVersion)) {
      st.fn = fn;
      this.#refreshVersion(st);
    }
    if (this.#isNewdeploy(fn)) this.#ensureMinScale(this.#state(fn));
  }

  #deleteFunction(fn: FunctionResource): void {
    const key = fnKey(fn.metadata.namespace, fn.metadata.name);
    this.#functions.delete(key);
    const st = this.#fns.get(key);
    if (!st) return;
    this.#fns.delete(key);
    for (const w of st.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new FlintError('FLINT_ERR_NOT_FOUND', `function '${fn.metadata.name}' was deleted`));
    }
    this.#drainAll(st);
    this.#logs.close(fn.metadata.namespace, fn.metadata.name);
  }

  /**
   * A new function or package version. Its instances are started at once,
   * and the old ones keep taking requests until instances of the new version
   * are ready to take over their load (a rolling update, at most ROLL_SURGE
   * starts at a time): a request never waits for a specialization just
   * because the code changed. New requests prefer an instance of the new
   * version as soon as one is ready.
   */
  #refreshVersion(st: FnState): void {
    const v = this.#versionOf(st.fn);
    if (v === st.version) return;
    st.version = v;
    this.#logs.write(st.fn.metadata.namespace, st.fn.metadata.name, 'flint', 'function changed: new instances are started; old ones serve until new ones can take their load, then drain');
    if (this.#isNewdeploy(st.fn)) this.#ensureMinScale(st);
    this.#rollOn(st);
    this.#dispatch(st);
  }

  /** Instances of an older version that still take requests. */
  #outdated(st: FnState): Instance[] {
    const out: Instance[] = [];
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
  #rollOn(st: FnState): void {
    if (this.#stopped) return;
    this.#drainCovered(st);
    const left = this.#outdated(st);
    if (left.length === 0) return;
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    let load = 0;
    for (const inst of left) load += inst.active;
    const needed = Math.max(1, Math.ceil(load / rpp));
    while (st.starting < Math.min(ROLL_SURGE, needed)) this.#startInstance(st);
  }

  /** Drains old instances, least busy first, while the current version's free slots can take what they carry. */
  #drainCovered(st: FnState): void {
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
      this.#logs.write(st.fn.metadata.namespace, st.fn.metadata.name, 'flint', `instance ${inst.id} replaced by one of the new version; it drains`);
      this.#drain(st, inst);
    }
  }

  /** The new version failed to start: traffic moves to it anyway, so its error is seen rather than the old code kept. */
  #endRollout(st: FnState): void {
    for (const inst of this.#outdated(st)) this.#drain(st, inst);
  }

  #drain(st: FnState, inst: Instance): void {
    inst.draining = true;
    if (inst.active === 0) this.#retire(st, inst, 'drained');
    else this.#limitLongLived(st, inst);
  }

  /**
   * Requests, however long, finish on a draining instance; long-lived
   * connections (WebSockets) would keep old or deleted code running for as
   * long as their clients like. Once they are all it holds, it is stopped
   * shortly: the worker tells its WebSockets it is going away (1001), and
   * clients reconnect to the new code.
   */
  #limitLongLived(st: FnState, inst: Instance): void {
    if (!inst.draining || inst.active === 0 || inst.active !== inst.longLived || inst.drainDeadline !== undefined) return;
    const ms = this.#o.longLivedDrainMs ?? LONG_LIVED_DRAIN_MS;
    inst.drainDeadline = setTimeout(() => this.#retire(st, inst, `draining, with only long-lived connections left after ${ms / 1000} s`), ms);
    inst.drainDeadline.unref();
  }

  #drainAll(st: FnState): void {
    for (const inst of st.instances) this.#drain(st, inst);
  }

  #retire(st: FnState, inst: Instance, why: string): void {
    clearTimeout(inst.drainDeadline);
    if (!st.instances.delete(inst)) return;
    this.#logs.write(st.fn.metadata.namespace, st.fn.metadata.name, 'flint', `instance ${inst.id} stopped (${why})`);
    void inst.worker.kill(why === 'timeout' ? 0 : undefined);
  }

  #isNewdeploy(fn: FunctionResource): boolean {
    return fn.spec.invokeStrategy?.executionStrategy?.executorType === 'newdeploy';
  }

  #maxInstances(fn: FunctionResource): number {
    const es = fn.spec.invokeStrategy?.executionStrategy;
    if (this.#isNewdeploy(fn)) return Math.max(1, es?.maxScale ?? es?.minScale ?? 1);
    return fn.spec.concurrency ?? 500;
  }

  #ensureMinScale(st: FnState): void {
    const min = st.fn.spec.invokeStrategy?.executionStrategy?.minScale ?? 1;
    const current = this.#liveCurrent(st) + st.starting;
    for (let i = current; i < min; i++) this.#startInstance(st);
  }

  // ---- acquiring -----------------------------------------------------------------

  tryAcquire(fn: FunctionResource): Lease | undefined {
    if (this.#stopped) return undefined;
    const st = this.#current(fn);
    const ready = this.#freeInstance(st);
    return ready === undefined ? undefined : this.#lease(st, ready, false);
  }

  acquire(fn: FunctionResource, signal?: AbortSignal): Promise<Lease> {
    if (this.#stopped) return Promise.reject(new FlintError('FLINT_ERR_UNAVAILABLE', 'the executor is stopping'));
    const st = this.#current(fn);
    const ready = this.#freeInstance(st);
    if (ready) return Promise.resolve(this.#lease(st, ready, false));
    const queue = this.#o.queue ?? DEFAULT_QUEUE;
    if (st.waiters.length >= queue.maxLength) return Promise.reject(this.#queueFull(st, `${queue.maxLength} requests are already waiting (executor.maxQueueLength)`));
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        extended: false,
        // A request waits for a free slot at most the queue's timeout; one an instance is being specialized for waits for that too.
        timer: setTimeout(() => this.#waitedTooLong(st, waiter), queue.timeoutMs),
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

  #waitedTooLong(st: FnState, waiter: Waiter): void {
    const i = st.waiters.indexOf(waiter);
    if (i < 0) return;
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    const specializing = st.starting - st.budgetBlocked;
    if (!waiter.extended && i < specializing * rpp) {
      // An instance for it is being specialized: that has a deadline of its own.
      waiter.extended = true;
      waiter.timer = setTimeout(() => this.#waitedTooLong(st, waiter), (st.fn.spec.invokeStrategy?.executionStrategy?.specializationTimeout ?? 120) * 1000);
      return;
    }
    this.#removeWaiter(st, waiter);
    const timeoutS = (this.#o.queue ?? DEFAULT_QUEUE).timeoutMs / 1000;
    const budget = this.#o.budget;
    if (st.budgetBlocked > 0 && budget) {
      const pool = this.#pools.get(fnKey(st.fn.spec.environment.namespace ?? st.fn.metadata.namespace, st.fn.spec.environment.name));
      const mb = pool ? memoryOf(pool.env, this.#o.memoryMB) : this.#o.memoryMB;
      waiter.reject(
        new FlintError('FLINT_ERR_UNAVAILABLE', `no instance of function '${st.fn.metadata.name}' could be started within ${timeoutS} s: the instance budget is spent (${budget.describe(mb)}) and nothing idle could be stopped for it`, {
          retryAfterSeconds: RETRY_AFTER_S,
        }),
      );
    } else {
      waiter.reject(this.#queueFull(st, `waited ${timeoutS} s (executor.queueTimeoutSeconds)`));
    }
  }

  #queueFull(st: FnState, why: string): FlintError {
    return new FlintError('FLINT_ERR_TOO_MANY_REQUESTS', `function '${st.fn.metadata.name}' has no free instance: all ${this.#maxInstances(st.fn)} it may have are busy and ${why}`, {
      retryAfterSeconds: RETRY_AFTER_S,
    });
  }

  /** The state of `fn`, moved on to the newer of the caller's copy and the executor's own. */
  #current(fn: FunctionResource): FnState {
    // The caller's copy may lag behind the executor's own watch, or lead it.
    const known = this.#functions.get(fnKey(fn.metadata.namespace, fn.metadata.name));
    if (known && known.metadata.uid === fn.metadata.uid && Number(known.metadata.resourceVersion) > Number(fn.metadata.resourceVersion)) fn = known;
    const st = this.#state(fn);
    if (Number(fn.metadata.resourceVersion) > Number(st.fn.metadata.resourceVersion)) {
      st.fn = fn;
      this.#refreshVersion(st);
    }
    return st;
  }

  #removeWaiter(st: FnState, w: Waiter): boolean {
    const i = st.waiters.indexOf(w);
    if (i < 0) return false;
    st.waiters.splice(i, 1);
    clearTimeout(w.timer);
    // Nobody left to serve: starts waiting for the budget give up.
    if (st.waiters.length === 0 && st.budgetBlocked > 0) st.budgetWait.abort();
    return true;
  }

  #freeInstance(st: FnState): Instance | undefined {
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    let best: Instance | undefined;
    let old: Instance | undefined;
    for (const inst of st.instances) {
      if (inst.draining || inst.active >= rpp || !inst.worker.isAlive()) continue;
      if (inst.version !== st.version) {
        // During a rollout: taken only when no instance of the new version is free.
        if (!old || inst.active < old.active) old = inst;
      } else if (!best || inst.active < best.active) best = inst;
    }
    return best ?? old;
  }

  /** Instances of the current version that take requests, and those on the way. */
  #liveCurrent(st: FnState): number {
    let live = 0;
    for (const inst of st.instances) if (!inst.draining && inst.version === st.version) live++;
    return live;
  }

  /** Starts instances while waiting requests outnumber the slots on the way. */
  #scale(st: FnState): void {
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    const max = this.#maxInstances(st.fn);
    while (st.waiters.length > st.starting * rpp) {
      if (this.#liveCurrent(st) + st.starting >= max) break;
      this.#startInstance(st);
    }
  }

  #startInstance(st: FnState): void {
    st.starting++;
    const fn = st.fn;
    const version = st.version;
    const ns = fn.metadata.namespace;
    const name = fn.metadata.name;
    const sink = (line: string, stream: 'stdout' | 'stderr') => this.#logs.write(ns, name, stream, line);
    void (async () => {
      let worker: WorkerHandle | undefined;
      try {
        const envRef = fn.spec.environment;
        const pool = this.#pools.get(fnKey(envRef.namespace ?? ns, envRef.name));
        if (!pool) throw new FlintError('FLINT_ERR_NOT_FOUND', `environment '${envRef.name}' not found in namespace '${envRef.namespace ?? ns}'`);
        const ref = fn.spec.package.packageref;
        const pkg = this.#packages.get(fnKey(ref.namespace ?? ns, ref.name));
        if (!pkg) throw new FlintError('FLINT_ERR_NOT_FOUND', `package '${ref.name}' not found in namespace '${ref.namespace ?? ns}'`);
        worker = this.#isNewdeploy(fn) ? undefined : pool.take();
        if (worker) outputSinks.set(worker.id, sink);
        else worker = await this.#startBudgetedWorker(st, pool.env, sink);
        const timeoutMs = (fn.spec.invokeStrategy?.executionStrategy?.specializationTimeout ?? 120) * 1000;
        const m = await materialize(this.#code, fn, pkg, pool.env.spec.keeparchive === true, worker);
        await worker.specialize(m, timeoutMs);
        st.starting--;
        const inst: Instance = { id: worker.id, worker, startedAt: Date.now(), version, active: 0, longLived: 0, lastUsed: Date.now(), draining: false, served: 0 };
        if (this.#fns.get(st.key) !== st || this.#stopped) {
          void worker.kill(0);
          return;
        }
        st.instances.add(inst);
        this.#logs.write(ns, name, 'flint', `instance ${inst.id} specialized`);
        void worker.exited.then(({ code, signal }) => {
          if (st.instances.has(inst)) {
            this.#logs.write(ns, name, 'flint', `instance ${inst.id} exited (code ${code}, signal ${signal}); it will be replaced on demand`);
            st.instances.delete(inst);
            if (this.#isNewdeploy(st.fn) && !this.#stopped) this.#ensureMinScale(st);
            this.#scale(st);
          }
        });
        if (version !== st.version) {
          // The function changed again while this one specialized: it goes, and the rollout starts one of the newest.
          this.#drain(st, inst);
          this.#rollOn(st);
        } else this.#rollOn(st);
        this.#dispatch(st, inst);
      } catch (err) {
        st.starting--;
        if (err === BUDGET_WAIT_ABANDONED) {
          // Nobody waited for it any more; requests that came since get a start of their own.
          if (st.starting === 0) this.#endRollout(st);
          this.#scale(st);
          return;
        }
        this.#endRollout(st);
        // Never served a request; it may be stuck loading the code.
        if (worker) void worker.kill(0);
        const e = err instanceof FlintError ? err : new FlintError('FLINT_ERR_SPECIALIZE_FAILED', String((err as Error)?.message ?? err));
        this.#logs.write(ns, name, 'flint', `specialization failed: ${e.message}`);
        this.#log.warn({ fn: st.key, err: e.message }, 'specialization failed');
        // Requests counting on this instance fail with its error, unless
        // another instance is on the way or ready for them.
        const capacity = st.starting * (st.fn.spec.requestsPerPod ?? 1);
        while (st.waiters.length > capacity && !this.#freeInstance(st)) {
          const w = st.waiters.pop()!;
          clearTimeout(w.timer);
          w.reject(e);
        }
        this.#dispatch(st);
      }
    })();
  }

  /** Hands free slots to waiting requests, oldest first. */
  #dispatch(st: FnState, fresh?: Instance): void {
    let first = fresh;
    while (st.waiters.length > 0) {
      const inst = first && first.active < (st.fn.spec.requestsPerPod ?? 1) && !first.draining ? first : this.#freeInstance(st);
      if (!inst) break;
      const w = st.waiters.shift()!;
      clearTimeout(w.timer);
      w.resolve(this.#lease(st, inst, inst === fresh && inst.served === 0));
      first = inst === fresh ? fresh : undefined;
    }
    if (st.waiters.length > 0) this.#scale(st);
  }

  #lease(st: FnState, inst: Instance, coldStart: boolean): Lease {
    inst.active++;
    inst.served++;
    let released = false;
    let longLived = false;
    return {
      socketPath: inst.worker.socketPath,
      instanceId: inst.id,
      coldStart,
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
          this.#logs.write(st.fn.metadata.namespace, st.fn.metadata.name, 'flint', `instance ${inst.id} exceeded the function timeout and is replaced`);
          this.#retire(st, inst, 'timeout');
        } else if (outcome === 'unreachable' && !inst.worker.isAlive()) {
          st.instances.delete(inst);
        } else if (st.fn.spec.onceOnly) {
          this.#retire(st, inst, 'onceOnly');
        } else if (inst.draining && inst.active === 0) {
          this.#retire(st, inst, 'drained');
        } else {
          this.#limitLongLived(st, inst);
        }
        this.#dispatch(st);
      },
    };
  }

  #reap(): void {
    const now = Date.now();
    for (const st of this.#fns.values()) {
      const idleMs = (st.fn.spec.idletimeout ?? 120) * 1000;
      const keep = this.#isNewdeploy(st.fn) ? (st.fn.spec.invokeStrategy?.executionStrategy?.minScale ?? 1) : 0;
      let live = [...st.instances].filter((i) => !i.draining).length;
      for (const inst of st.instances) {
        if (live <= keep) break;
        if (inst.active === 0 && now - inst.lastUsed > idleMs) {
          this.#retire(st, inst, `idle for ${st.fn.spec.idletimeout ?? 120} s`);
          live--;
        }
      }
    }
  }
}

/** Where a pooled worker's output goes once a function owns it. */
const outputSinks = new Map<string, (line: string, stream: 'stdout' | 'stderr') => void>();

export function createProcessExecutor(opts: ProcessExecutorOptions): ProcessExecutor {
  return new ProcessExecutor(opts);
}
