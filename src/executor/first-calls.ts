// First calls the executor expects: a function created, or given new code,
// while the server runs has no instance of that code yet, so its next call
// is a cold start. Deployments come in batches (an application's functions,
// a CI pipeline's update of all of them), and their first calls then come in
// a burst that takes far more warm workers than a pool's size: each one
// missing is a whole process start on a request's path, and on a small
// machine those starts queue behind each other.
//
// So for a while after such a change, each of these functions counts for one
// more warm worker in its environment's pool (env-pool.ts), started in the
// background before anyone calls. A function stops counting when the start
// of an instance of it begins, when it is deleted, or when the window has
// passed without a call. Functions the server finds at start are not
// counted: nothing says they will be called soon, and a restart of a server
// holding a thousand idle functions should not start a pool's growth limit
// of workers.

interface Expected {
  env: string;
  until: number;
}

export class ExpectedFirstCalls {
  readonly #windowMs: number;
  readonly #now: () => number;
  /**
   * Function key -> what is expected of it. Every entry gets the same window and is re-inserted when renewed, so
   * the map's order is the order of expiry: expired entries are always at its head.
   */
  readonly #expected = new Map<string, Expected>();
  /** Environment key -> how many entries of #expected name it. */
  readonly #counts = new Map<string, number>();
  /** Function key -> the code version last seen, so a change that does not touch the code is not counted again. */
  readonly #seen = new Map<string, string>();

  /** `windowMs`: how long a new function counts; 0 turns this off. */
  constructor(windowMs: number, now: () => number = Date.now) {
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /**
   * A function as the executor now knows it, in environment `env` (its key), at code `version`. `announced`: it was
   * created or changed while the server ran (a watch event), not found at start. `runnable`: it has code an
   * instance could start with (a package still building, or one that is missing, has none). True when it now
   * counts as expected.
   */
  note(fn: string, env: string, version: string, announced: boolean, runnable = true): boolean {
    const before = this.#seen.get(fn);
    this.#seen.set(fn, version);
    if (this.#windowMs <= 0 || !announced || before === version) return false;
    this.#remove(fn);
    if (!runnable) return false;
    this.#expected.set(fn, { env, until: this.#now() + this.#windowMs });
    this.#counts.set(env, (this.#counts.get(env) ?? 0) + 1);
    return true;
  }

  /**
   * An instance of the function at `version` is starting: its first call no longer needs a warm worker of its own.
   * True when the function was counted until now.
   */
  started(fn: string, version: string): boolean {
    this.#seen.set(fn, version);
    return this.#remove(fn);
  }

  /** The function is gone, or no longer uses its environment's pool. */
  forget(fn: string): void {
    this.#remove(fn);
    this.#seen.delete(fn);
  }

  /** The functions of environment `env` whose first call is expected now. */
  count(env: string): number {
    const now = this.#now();
    for (const [fn, e] of this.#expected) {
      if (e.until > now) break;
      this.#remove(fn);
    }
    return this.#counts.get(env) ?? 0;
  }

  #remove(fn: string): boolean {
    const e = this.#expected.get(fn);
    if (e === undefined) return false;
    this.#expected.delete(fn);
    const n = (this.#counts.get(e.env) ?? 1) - 1;
    if (n > 0) this.#counts.set(e.env, n);
    else this.#counts.delete(e.env);
    return true;
  }
}
