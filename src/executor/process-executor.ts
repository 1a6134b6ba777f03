// The local executor: function instances are sandboxed worker processes.
// poolmgr functions specialize a warm worker of their environment's pool on
// first use; newdeploy functions keep minScale..maxScale dedicated instances.
// Both scale out when concurrent requests exceed requestsPerPod per instance,
// are reaped when idle, and switch to new instances when the function or its
// package changes while the old ones drain.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { FlintError } from '../api/errors.ts';
import { runtimeForImage } from '../api/images.ts';
import type { InstancesReport } from '../api/instances.ts';
import type { Environment, FunctionResource, Package } from '../api/kinds.ts';
import { type ArchiveStore, isZipFile } from '../archive/index.ts';
import { archiveShas } from '../archive/refs.ts';
import { resolveArchive } from '../archive/resolve.ts';
import type { DataLayout } from '../config/layout.ts';
import type { EgressProvider } from '../sandbox/egress.ts';
import type { Store } from '../store/store.ts';
import { CoreExecutor } from './core/core-executor.ts';
import { slotKey as fnKey, InstanceCore, isNewdeploy, RETRY_AFTER_S } from './core/instance-core.ts';
import { InstanceState } from './core/instance-state.ts';
import { type FunctionSlot, START_ABANDONED, type StartReason } from './core/types.ts';
import { DeployCache } from './deploy-cache.ts';
import { EnvPool, sameSettings } from './env-pool.ts';
import { ExpectedFirstCalls, expectFirstCall, functionsOf } from './first-calls.ts';
import { FunctionLogs } from './function-log.ts';
import type { InstanceBudget, Reservation } from './instance-budget.ts';
import { type CodeSource, materialize } from './materialize.ts';
import { startWorker, type WorkerHandle } from './process/worker-process.ts';
import { StartGate } from './start-gate.ts';

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
  /** Worker processes starting at once (default: twice the machine's cores); see start-gate.ts. */
  concurrentStarts?: number;
  /** The CPUs workers run on, as taskset writes them ('' or unset: the scheduler's choice). */
  cpus?: string;
  /** How long a function created or given new code counts for a warm worker more in its pool (first-calls.ts); 0 or unset: never. */
  firstCallWindowSeconds?: number;
}

/** The longest one worker's start holds its place among the concurrent starts. */
const START_HOLD_CAP_MS = 1000;
/** The longest a background start (a pool's, a rollout's) waits behind starts requests wait for. */
const START_PROMOTE_MS = 5000;

/** A specialized worker, as the instance core tracks it. */
class WorkerInstance extends InstanceState {
  readonly worker: WorkerHandle;

  constructor(worker: WorkerHandle, version: string) {
    super(version);
    this.worker = worker;
  }

  get id(): string {
    return this.worker.id;
  }

  get socketPath(): string {
    return this.worker.socketPath;
  }

  usable(): boolean {
    return this.worker.isAlive();
  }
}

type Slot = FunctionSlot<WorkerInstance>;

/** The share of the instance budget past which warm pools stop growing with demand. */
const GROWTH_BUDGET_SHARE = 0.75;

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

export class ProcessExecutor extends CoreExecutor<WorkerInstance> {
  readonly #o: ProcessExecutorOptions;
  readonly #log: Logger;
  readonly #logs: FunctionLogs;
  readonly #pools = new Map<string, EnvPool>();
  #reaper: NodeJS.Timeout | undefined;
  /** Function instances looking for room in the budget right now. */
  #budgetDemand = 0;
  /** Function instances starting a process of their own (no warm worker was there) right now. */
  #processStarts = 0;

  readonly #code: CodeSource;
  readonly #gate: StartGate;
  readonly #firstCalls: ExpectedFirstCalls;

  constructor(opts: ProcessExecutorOptions) {
    super();
    this.#o = opts;
    this.#log = opts.logger;
    this.#logs = new FunctionLogs(opts.layout, (namespace, name, err) => this.#log.error({ namespace, fn: name, err: err.message }, "refusing to write this function's log: its file or directory is not the server's own"));
    this.#firstCalls = new ExpectedFirstCalls((opts.firstCallWindowSeconds ?? 0) * 1000);
    this.#gate = new StartGate(opts.concurrentStarts ?? os.availableParallelism() * 2, { holdCapMs: START_HOLD_CAP_MS, promoteAfterMs: START_PROMOTE_MS });
    this.#code = { store: opts.store, archives: opts.archives, deployCache: new DeployCache(opts.layout.deployCache, opts.maxUnpackedBytes ?? 2 * 1024 ** 3) };
    this.core = new InstanceCore<WorkerInstance>({
      queue: opts.queue,
      longLivedDrainMs: opts.longLivedDrainMs,
      backend: {
        startInstance: (slot, version, why) => this.#startInstance(slot, version, why),
        stopInstance: (_slot, inst, _why, immediate) => void inst.worker.kill(immediate ? 0 : undefined),
        versionOf: (fn) => this.#versionOf(fn),
        maxInstances: (fn) => {
          const es = fn.spec.invokeStrategy?.executionStrategy;
          if (isNewdeploy(fn)) return Math.max(1, es?.maxScale ?? es?.minScale ?? 1);
          return fn.spec.concurrency ?? 500;
        },
        log: (fn, line) => this.#logs.write(fn.metadata.namespace, fn.metadata.name, 'flint', line),
        roomError: (slot, waitedSeconds) => this.#budgetSpent(slot, waitedSeconds),
      },
    });
  }

  async start(): Promise<void> {
    const { store } = this.#o;
    const envs = await store.list('Environment');
    for (const env of envs.items) this.#upsertEnv(env);
    const pkgs = await store.list('Package');
    for (const p of pkgs.items) this.packages.set(fnKey(p.metadata.namespace, p.metadata.name), p);
    const fns = await store.list('Function');
    for (const f of fns.items) this.#upsertFunction(f, false);
    this.watches.push(
      store.watch({ kind: 'Environment', sinceResourceVersion: envs.resourceVersion }, (ev) => {
        const env = ev.object as Environment;
        if (ev.type === 'DELETED') this.#deleteEnv(env);
        else this.#upsertEnv(env);
      }),
      store.watch({ kind: 'Package', sinceResourceVersion: pkgs.resourceVersion }, (ev) => {
        const key = fnKey(ev.object.metadata.namespace, ev.object.metadata.name);
        if (ev.type === 'DELETED') this.packages.delete(key);
        else this.packages.set(key, ev.object as Package);
        this.#code.deployCache.retain(new Set([...this.packages.values()].flatMap((p) => archiveShas(p.spec.deployment))));
        if (ev.type !== 'DELETED') {
          this.#prefetch(ev.object as Package);
          this.#noteFirstCalls(ev.object as Package);
        }
        // Functions using this package move to instances of the new code.
        this.core.refreshAll();
      }),
      store.watch({ kind: 'Function', sinceResourceVersion: fns.resourceVersion }, (ev) => {
        const fn = ev.object as FunctionResource;
        if (ev.type === 'DELETED') this.#deleteFunction(fn);
        else this.#upsertFunction(fn, true);
      }),
    );
    this.#reaper = setInterval(() => {
      this.core.reap();
      for (const pool of this.#pools.values()) pool.trim();
    }, this.#o.reapIntervalMs);
    this.#reaper.unref();
  }

  #stopping: Promise<void> | undefined = undefined;

  /** Stops every worker (they finish what they have); later calls wait for the first. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    this.stopped = true;
    for (const w of this.watches.splice(0)) w.close();
    if (this.#reaper) clearInterval(this.#reaper);
    const kills: Promise<void>[] = [];
    for (const pool of this.#pools.values()) kills.push(pool.close());
    for (const inst of this.core.stop()) kills.push(inst.worker.kill());
    await Promise.all(kills);
    await this.#logs.closeAll();
  }

  /** A line of Flint's own in a function's log (`flint fn log`), such as a time trigger's run; false when it was not written. */
  writeFunctionLog(namespace: string, name: string, line: string): boolean {
    return this.#logs.write(namespace, name, 'flint', line);
  }

  /** Worker processes starting now (holding one of the concurrent starts), waiting for their turn, and how many may start at once. */
  starts(): { starting: number; waiting: number; limit: number } {
    return { starting: this.#gate.held, waiting: this.#gate.waiting, limit: this.#gate.slots };
  }

  /** Counts for tests and status: instances of a function, warm workers of an environment. */
  status(): { functions: Record<string, { instances: number; starting: number }>; pools: Record<string, number> } {
    const pools: Record<string, number> = {};
    for (const [k, p] of this.#pools) pools[k] = p.idleCount;
    return { functions: this.core.status(), pools };
  }

  /** A function's instances and the budget, for `flint fn pods` (GET .../functions/{name}/instances). */
  instances(namespace: string, name: string): InstancesReport {
    const report = this.core.report(namespace, name);
    const b = this.#o.budget;
    return b ? { ...report, budget: { instances: b.instances, maxInstances: b.limits.maxInstances, memoryMB: b.memoryMB, maxMemoryMB: b.limits.maxMemoryMB } } : report;
  }




  // ---- environments ------------------------------------------------------------

  #upsertEnv(env: Environment): void {
    const key = fnKey(env.metadata.namespace, env.metadata.name);
    const existing = this.#pools.get(key);
    if (existing) {
      if (!sameSettings(existing.env, env)) void existing.update(env);
      else existing.env = env;
      return;
    }
    // Warm workers wait while a function's instance waits for the budget: they would take the room it is freeing.
    // Workers beyond the pool's size (grown by a burst) also wait for the burst's own process starts to finish,
    // and take no more than three quarters of the budget, so that functions never have to stop them to start.
    const hasRoom = (e: Environment, growth: boolean) => {
      if (this.#budgetDemand > 0) return false;
      const mb = memoryOf(e, this.#o.memoryMB);
      const b = this.#o.budget;
      if (!growth) return b?.fits(mb) ?? true;
      if (this.#processStarts > 0) return false;
      return !b || (b.instances + 1 <= b.limits.maxInstances * GROWTH_BUDGET_SHARE && b.memoryMB + mb <= b.limits.maxMemoryMB * GROWTH_BUDGET_SHARE);
    };
    const pool = new EnvPool(env, this.#o.poolSize, (e) => this.#startPoolWorker(key, e), this.#log, hasRoom, Date.now, () => this.#firstCalls.count(key));
    this.#pools.set(key, pool);
    pool.refill();
  }

  #deleteEnv(env: Environment): void {
    const key = fnKey(env.metadata.namespace, env.metadata.name);
    void this.#pools.get(key)?.close();
    this.#pools.delete(key);
  }

  /**
   * A warm worker for an environment's pool; the pool asks first whether the budget has room. Its start may wait
   * seconds for its turn (start-gate.ts) while holding its share of the budget, so when the turn comes it is given
   * up if a function now waits for that share, or if the environment was deleted or changed meanwhile.
   */
  #startPoolWorker(key: string, env: Environment): Promise<WorkerHandle> {
    const reservation = this.#o.budget?.reserve(memoryOf(env, this.#o.memoryMB));
    if (this.#o.budget && !reservation) return Promise.reject(new FlintError('FLINT_ERR_UNAVAILABLE', this.#o.budget.describe(memoryOf(env, this.#o.memoryMB))));
    const wanted = () => {
      const pool = this.#pools.get(key);
      return this.#budgetDemand === 0 && pool !== undefined && sameSettings(pool.env, env);
    };
    return this.#startWorker(env, reservation, undefined, true, wanted);
  }

  /** `wanted`: asked when the start's turn comes; false gives it up (START_ABANDONED) without starting a process. */
  #startWorker(env: Environment, reservation: Reservation | undefined, sink?: OutputSink, background = false, wanted: () => boolean = () => true): Promise<WorkerHandle> {
    const runtime = runtimeForImage(env.spec.runtime.image);
    if (!runtime) {
      reservation?.release();
      throw new FlintError('FLINT_ERR_VALIDATION', `environment '${env.metadata.name}' has an image no runtime serves`);
    }
    const id = `${env.metadata.name}-${randomBytes(4).toString('hex')}`;
    const instanceDir = path.join(this.#o.layout.instances, id);
    const box = { sink };
    const handle = this.#gate.run(background ? 'background' : 'demand', async () => {
      // Its turn came after the executor stopped, or when it was no longer wanted: no process is started.
      if (this.stopped || !wanted()) throw START_ABANDONED;
      return startWorker({
      id,
      runtime,
      instanceDir,
      sandbox: this.#o.sandbox,
      allowNetwork: env.spec.allowAccessToExternalNetwork === true,
      egress: this.#o.egress,
      memoryMB: memoryOf(env, this.#o.memoryMB),
      cpus: this.#o.cpus,
      // SIGTERM, then this long to finish before SIGKILL, as a pod's terminationGracePeriodSeconds.
      killGraceMs: (env.spec.terminationGracePeriod ?? 90) * 1000,
      cpuMillis: cpuMillisOf(env),
      env: env.spec.runtime.env,
      // Raising a priority back needs root: elsewhere a warm worker starts at the normal one.
      background: background && process.getuid?.() === 0,
      // A worker a request waits for (not in the background) skips the runtime's warm-up: the request pays for what it uses.
      warmUp: background,
      onOutput: (line, stream) => (box.sink ?? outputSinks.get(id))?.(line, stream, id),
      });
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
    if (this.stopped) return;
    for (const pool of this.#pools.values()) pool.refill();
  }

  /**
   * A new worker for a function's instance within the budget: when it is
   * spent, an idle warm worker of another environment is stopped to make
   * room, else the least recently used idle instance of another function;
   * with neither, the start waits for a release until no request waits for
   * it any more.
   */
  async #startBudgetedWorker(st: Slot, env: Environment, sink: OutputSink, background: boolean): Promise<WorkerHandle> {
    const budget = this.#o.budget;
    if (!budget) return this.#startWorker(env, undefined, sink, background);
    const mb = memoryOf(env, this.#o.memoryMB);
    const first = budget.reserve(mb);
    if (first) return this.#startWorker(env, first, sink, background);
    this.#budgetDemand++;
    try {
      return await this.#waitForBudget(st, env, mb, sink, background);
    } finally {
      if (--this.#budgetDemand === 0 && !this.stopped) for (const pool of this.#pools.values()) pool.refill();
    }
  }

  async #waitForBudget(st: Slot, env: Environment, mb: number, sink: OutputSink, background: boolean): Promise<WorkerHandle> {
    const budget = this.#o.budget as InstanceBudget;
    for (;;) {
      const reservation = budget.reserve(mb);
      if (reservation) return this.#startWorker(env, reservation, sink, background);
      const victim = this.#reclaimable(st);
      if (victim) {
        await victim;
        continue;
      }
      if (st.waiting === 0 && !isNewdeploy(st.fn)) throw START_ABANDONED;
      st.blocked++;
      try {
        await budget.nextRelease(st.roomWait.signal);
      } finally {
        st.blocked--;
      }
      if (this.stopped) throw START_ABANDONED;
      if (st.roomWait.signal.aborted) {
        st.roomWait = new AbortController();
        if (st.waiting === 0) throw START_ABANDONED;
      }
    }
  }

  /** Stops something idle that is not `st`'s, to free budget; resolves when it has exited. */
  #reclaimable(st: Slot): Promise<void> | undefined {
    for (const pool of this.#pools.values()) {
      const w = pool.evictIdle();
      if (w) return w.kill(0);
    }
    const lru = this.core.leastRecentlyUsedIdle(st);
    if (!lru) return undefined;
    this.core.retire(lru.slot, lru.inst, `reclaimed for function '${st.fn.metadata.name}': the instance budget is spent`);
    return lru.inst.worker.exited.then(() => {});
  }

  #budgetSpent(st: Slot, waitedSeconds: number): FlintError | undefined {
    const budget = this.#o.budget;
    if (!budget) return undefined;
    const pool = this.#pools.get(fnKey(st.fn.spec.environment.namespace ?? st.fn.metadata.namespace, st.fn.spec.environment.name));
    const mb = pool ? memoryOf(pool.env, this.#o.memoryMB) : this.#o.memoryMB;
    return new FlintError(
      'FLINT_ERR_UNAVAILABLE',
      `no instance of function '${st.fn.metadata.name}' could be started within ${waitedSeconds} s: the instance budget is spent (${budget.describe(mb)}) and nothing idle could be stopped for it`,
      { retryAfterSeconds: RETRY_AFTER_S },
    );
  }

  // ---- functions -----------------------------------------------------------------

  #versionOf(fn: FunctionResource): string {
    const ref = fn.spec.package.packageref;
    const pkg = this.packages.get(fnKey(ref.namespace ?? fn.metadata.namespace, ref.name));
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
    const used = [...this.functions.values()].some((f) => {
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

  /** `announced`: created or changed while the server runs (a watch event), not found at start. */
  #upsertFunction(fn: FunctionResource, announced: boolean): void {
    this.functions.set(fnKey(fn.metadata.namespace, fn.metadata.name), fn);
    const ref = fn.spec.package.packageref;
    const pkg = this.packages.get(fnKey(ref.namespace ?? fn.metadata.namespace, ref.name));
    if (pkg) this.#prefetch(pkg);
    this.#expectFirstCall(fn, announced)?.refill();
    this.core.upsertFunction(fn);
  }

  /** A function whose code is new to this server will need an instance of it: its pool grows for it (first-calls.ts). */
  #expectFirstCall(fn: FunctionResource, announced: boolean): EnvPool | undefined {
    const env = expectFirstCall(this.#firstCalls, fn, this.packages, this.#versionOf(fn), announced);
    return env === undefined ? undefined : this.#pools.get(env);
  }

  /** New code in a package: the functions using it will each need an instance of it. Each pool refills once. */
  #noteFirstCalls(pkg: Package): void {
    const pools = new Set<EnvPool>();
    for (const fn of functionsOf(pkg, this.functions.values())) {
      const pool = this.#expectFirstCall(fn, true);
      if (pool) pools.add(pool);
    }
    for (const pool of pools) pool.refill();
  }

  #deleteFunction(fn: FunctionResource): void {
    this.#firstCalls.forget(fnKey(fn.metadata.namespace, fn.metadata.name));
    this.functions.delete(fnKey(fn.metadata.namespace, fn.metadata.name));
    this.core.deleteFunction(fn);
    this.#logs.close(fn.metadata.namespace, fn.metadata.name);
  }

  /** A new worker for an instance that found no warm one; pools grown by demand refill once none is starting. */
  async #startOwnProcess(st: Slot, env: Environment, sink: OutputSink, background: boolean): Promise<WorkerHandle> {
    this.#processStarts++;
    try {
      return await this.#startBudgetedWorker(st, env, sink, background);
    } finally {
      if (--this.#processStarts === 0 && !this.stopped) for (const pool of this.#pools.values()) pool.refill();
    }
  }

  /** A worker specialized for `st.fn` at `version`: a warm one of the environment's pool, else a new one within the budget. */
  async #startInstance(st: Slot, version: string, why: StartReason): Promise<WorkerInstance> {
    const fn = st.fn;
    const ns = fn.metadata.namespace;
    const name = fn.metadata.name;
    const sink: OutputSink = (line, stream, instance) => this.#logs.write(ns, name, stream, line, instance);
    let worker: WorkerHandle | undefined;
    try {
      const envRef = fn.spec.environment;
      const pool = this.#pools.get(fnKey(envRef.namespace ?? ns, envRef.name));
      if (!pool) throw new FlintError('FLINT_ERR_NOT_FOUND', `environment '${envRef.name}' not found in namespace '${envRef.namespace ?? ns}'`);
      const ref = fn.spec.package.packageref;
      const pkg = this.packages.get(fnKey(ref.namespace ?? ns, ref.name));
      if (!pkg) throw new FlintError('FLINT_ERR_NOT_FOUND', `package '${ref.name}' not found in namespace '${ref.namespace ?? ns}'`);
      // A first call the pool grew ahead for is not a burst for it to remember: that worker was already counted.
      const expected = this.#firstCalls.started(st.key, version);
      worker = isNewdeploy(fn) ? undefined : pool.take(!expected);
      if (worker) outputSinks.set(worker.id, sink);
      // No request waits for a rollout's or minScale's new worker (old instances serve meanwhile): it starts at the
      // warm pool's lower priority, raised when it is specialized, so the instances serving keep the CPU.
      else worker = await this.#startOwnProcess(st, pool.env, sink, why !== 'demand');
      const timeoutMs = (fn.spec.invokeStrategy?.executionStrategy?.specializationTimeout ?? 120) * 1000;
      const m = await materialize(this.#code, fn, pkg, pool.env.spec.keeparchive === true, worker);
      await worker.specialize(m, timeoutMs);
    } catch (err) {
      // Never served a request; it may be stuck loading the code.
      if (worker) void worker.kill(0);
      if (err !== START_ABANDONED) this.#log.warn({ fn: st.key, err: (err as Error).message }, 'specialization failed');
      throw err;
    }
    const inst = new WorkerInstance(worker, version);
    void worker.exited.then(({ code, signal }) => this.core.instanceLost(st, inst, `exited (code ${code}, signal ${signal})`));
    return inst;
  }
}

/** Where a worker's output lines go: its function's log, tagged with the worker's id. */
type OutputSink = (line: string, stream: 'stdout' | 'stderr', instance: string) => void;

/** Where a pooled worker's output goes once a function owns it. */
const outputSinks = new Map<string, OutputSink>();

export function createProcessExecutor(opts: ProcessExecutorOptions): ProcessExecutor {
  return new ProcessExecutor(opts);
}
