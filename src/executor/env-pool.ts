// The warm pool of one environment: `poolsize` generic workers (else the
// install's executor.poolSize) started ahead
// of need, so a function's first call only specializes one (a cold start of
// milliseconds rather than a process start).
import type { Logger } from 'pino';
import type { Environment } from '../api/kinds.ts';
import type { WorkerHandle } from './process/worker-process.ts';

const REFILL_DELAY_MS = 150;

export type WorkerFactory = (env: Environment) => Promise<WorkerHandle>;

export class EnvPool {
  env: Environment;
  readonly #idle: WorkerHandle[] = [];
  #starting = 0;
  #closed = false;
  #lastError: string | undefined;
  readonly #factory: WorkerFactory;
  readonly #log: Logger;
  readonly #defaultSize: number;
  readonly #hasRoom: (env: Environment) => boolean;

  /**
   * `defaultSize`: the size when the environment sets no poolsize.
   * `hasRoom`: whether the instance budget lets one more warm worker start
   * now; the pool stays short until it does, and is refilled on a release.
   */
  constructor(env: Environment, defaultSize: number, factory: WorkerFactory, log: Logger, hasRoom: (env: Environment) => boolean = () => true) {
    this.env = env;
    this.#defaultSize = defaultSize;
    this.#factory = factory;
    this.#log = log;
    this.#hasRoom = hasRoom;
  }

  get size(): number {
    return this.env.spec.poolsize ?? this.#defaultSize;
  }

  get idleCount(): number {
    return this.#idle.length;
  }

  /** A warm worker, or undefined when none is ready; the pool refills itself. */
  take(): WorkerHandle | undefined {
    let w = this.#idle.shift();
    while (w && !w.isAlive()) w = this.#idle.shift();
    // Starting a replacement costs a process start's worth of CPU; on a small
    // machine doing it now would slow down the cold start it is meant to help.
    if (w) setTimeout(() => this.refill(), REFILL_DELAY_MS).unref();
    else this.refill();
    return w;
  }

  refill(): void {
    while (!this.#closed && this.#idle.length + this.#starting < this.size && this.#hasRoom(this.env)) {
      this.#starting++;
      this.#factory(this.env).then(
        (w) => {
          this.#starting--;
          this.#lastError = undefined;
          if (this.#closed || this.#idle.length >= this.size) {
            void w.kill();
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
