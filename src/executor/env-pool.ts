// The warm pool of one environment: `poolsize` generic workers (else the
// install's executor.poolSize) started ahead of need, so a function's first
// call only specializes one (a cold start of milliseconds rather than a
// process start).
//
// The pool grows with demand. A burst of first calls (many functions
// deployed at once, or a rollout replacing every instance of a busy
// function) takes far more workers than `poolsize`, and each one missing is
// a process start on the request's path. So the pool keeps, besides its
// size, as many workers as the largest burst it served within the last
// minute took (up to MAX_GROWTH more): the next such burst finds them warm.
// A minute without one and the extra idle workers are stopped again.
//
// It also grows ahead of demand: each function created or given new code a
// short while ago, not called since, counts for one more worker
// (first-calls.ts), so the first calls of a batch of deployments find them
// warm. The larger of the two, not their sum; and the takes of those first
// calls are not remembered as a burst, since the pool grew for them already.
import type { Logger } from 'pino';
import type { Environment } from '../api/kinds.ts';
import { START_ABANDONED } from './core/types.ts';
import { MAX_GROWTH } from './first-calls.ts';
import type { WorkerHandle } from './process/worker-process.ts';

const REFILL_DELAY_MS = 150;
/** Takes within this long of each other count as one burst. */
const BURST_MS = 1000;
/** How long the pool remembers a burst. */
const DEMAND_WINDOW_MS = 60_000;

export type WorkerFactory = (env: Environment) => Promise<WorkerHandle>;

/**
 * `growth`: whether the worker would be one beyond the pool's size (a
 * demand-driven one, which can wait until the cold starts of the burst
 * that asked for it have had the machine).
 */
export type RoomCheck = (env: Environment, growth: boolean) => boolean;

/** Whether two versions of an environment start the same workers (a metadata-only update does not change them). */
export function sameSettings(a: Environment, b: Environment): boolean {
  return a === b || JSON.stringify(a.spec) === JSON.stringify(b.spec);
}

export class EnvPool {
  env: Environment;
  readonly #idle: WorkerHandle[] = [];
  #starting = 0;
  #closed = false;
  #lastError: string | undefined;
  readonly #factory: WorkerFactory;
  readonly #log: Logger;
  readonly #defaultSize: number;
  readonly #hasRoom: RoomCheck;
  /** Bursts of takes: when each began and how many workers it took. */
  readonly #bursts: Array<{ at: number; takes: number }> = [];
  readonly #now: () => number;
  readonly #expected: () => number;

  /**
   * `defaultSize`: the size when the environment sets no poolsize.
   * `hasRoom`: whether the instance budget (and, for growth, the executor)
   * lets one more warm worker start now; the pool stays short until it
   * does, and is refilled on a release.
   * `expected`: how many of the environment's functions are expected to be called for the first time soon.
   */
  constructor(
    env: Environment,
    defaultSize: number,
    factory: WorkerFactory,
    log: Logger,
    hasRoom: RoomCheck = () => true,
    now: () => number = Date.now,
    expected: () => number = () => 0,
  ) {
    this.env = env;
    this.#expected = expected;
    this.#defaultSize = defaultSize;
    this.#factory = factory;
    this.#log = log;
    this.#hasRoom = hasRoom;
    this.#now = now;
  }

  get size(): number {
    return this.env.spec.poolsize ?? this.#defaultSize;
  }

  /**
   * The size plus what demand adds: the most workers one burst took within the last minute, or the first calls
   * expected soon, whichever is more.
   */
  get target(): number {
    const since = this.#now() - DEMAND_WINDOW_MS;
    while (this.#bursts.length > 0 && this.#bursts[0].at < since) this.#bursts.shift();
    // No growth for an environment that asks for no pool at all.
    if (this.size === 0) return 0;
    let peak = 0;
    for (const b of this.#bursts) peak = Math.max(peak, b.takes);
    return this.size + Math.min(MAX_GROWTH, Math.max(0, peak - this.size, this.#expected()));
  }

  get idleCount(): number {
    return this.#idle.length;
  }

  #noteTake(): void {
    const now = this.#now();
    const last = this.#bursts.at(-1);
    if (last && now - last.at < BURST_MS) last.takes++;
    else this.#bursts.push({ at: now, takes: 1 });
  }

  /**
   * A warm worker, or undefined when none is ready; the pool refills itself. `remember`: false for a take the pool
   * grew ahead for (an expected first call), which a burst's memory must not count a second time.
   */
  take(remember = true): WorkerHandle | undefined {
    if (remember) this.#noteTake();
    let w = this.#idle.shift();
    while (w && !w.isAlive()) w = this.#idle.shift();
    // Starting a replacement costs a process start's worth of CPU; on a small
    // machine doing it now would slow down the cold start it is meant to help.
    // A miss: refilled as soon as the caller has begun its own process start, which growth waits for.
    if (w) setTimeout(() => this.refill(), REFILL_DELAY_MS).unref();
    else setImmediate(() => this.refill());
    return w;
  }

  refill(): void {
    const target = this.target;
    while (!this.#closed && this.#idle.length + this.#starting < target) {
      const growth = this.#idle.length + this.#starting >= this.size;
      if (!this.#hasRoom(this.env, growth)) break;
      this.#starting++;
      const env = this.env;
      this.#factory(env).then(
        (w) => {
          this.#starting--;
          this.#lastError = undefined;
          if (this.#closed || this.#idle.length >= this.target) {
            void w.kill();
            return;
          }
          // Started with settings the environment no longer has (changed while it started): a function must never
          // be specialized on it. One of the new settings takes its place.
          if (!sameSettings(env, this.env)) {
            void w.kill();
            this.refill();
            return;
          }
          this.#idle.push(w);
          // A pooled worker that dies is dropped and replaced.
          void w.exited.then(() => {
            const i = this.#idle.indexOf(w);
            if (i >= 0) {
              this.#idle.splice(i, 1);
              this.refill();
            }
          });
        },
        (err) => {
          this.#starting--;
          // Given up when its turn to start came (the pool closed or changed, or a function needed its budget):
          // nothing went wrong. A pool that changed meanwhile counted this start as on its way and started none
          // of the new settings: it does now. Without room (a function waits for its budget) refill() starts
          // nothing, and the pool refills when the budget frees.
          if (err === START_ABANDONED) {
            if (!this.#closed) this.refill();
            return;
          }
          // The same failure every 2 s (an environment this server cannot run, such as one with external
          // network on a server without the privilege) is said once, until it changes.
          const message = String((err as Error)?.message ?? err);
          if (message !== this.#lastError) this.#log.error({ err, env: this.env.metadata.name }, 'could not start a pool worker');
          this.#lastError = message;
          // Back off instead of spinning on a broken environment.
          setTimeout(() => this.refill(), 2000).unref();
        },
      );
    }
  }

  /** Stops idle workers beyond the target, once the demand that grew the pool has passed; called periodically. */
  trim(): void {
    const target = this.target;
    while (this.#idle.length > target) void this.#idle.pop()?.kill();
  }

  /** An idle warm worker taken out to be stopped (to free budget for a function), without refilling; undefined when none. */
  evictIdle(): WorkerHandle | undefined {
    return this.#idle.shift();
  }

  /** New settings: idle workers started with the old ones are replaced. */
  async update(env: Environment): Promise<void> {
    this.env = env;
    const old = this.#idle.splice(0);
    await Promise.all(old.map((w) => w.kill()));
    this.refill();
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#idle.splice(0).map((w) => w.kill()));
  }
}
