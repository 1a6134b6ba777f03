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
// background before anyone calls. A function stops counting when an instance
// of it starts, when it is deleted, or when the window has passed without a
// call. Functions the server finds at start are not counted: nothing says
// they will be called soon, and a restart of a server holding a thousand
// idle functions should not start a pool's growth limit of workers.

interface Expected {
  env: string;
  version: string;
  until: number;
}

export class ExpectedFirstCalls {
  readonly #windowMs: number;
  readonly #now: () => number;
  /** Function key -> what is expected of it. */
  readonly #expected = new Map<string, Expected>();
  /** Function key -> the code version last seen, so a change that does not touch the code is not counted again. */
  readonly #seen = new Map<string, string>();

  /** `windowMs`: how long a new function counts; 0 turns this off. */
  constructor(windowMs: number, now: () => number = Date.now) {
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /**
   * A function as the executor now knows it, in environment `env` (its key), at code `version`. `announced`: it was
   * created or changed while the server ran (a watch event), not found at start. True when it now counts as expected.
   */
  note(fn: string, env: string, version: string, announced: boolean): boolean {
    const before = this.#seen.get(fn);
    this.#seen.set(fn, version);
    if (this.#windowMs <= 0 || !announced || before === version) return false;
    this.#expected.set(fn, { env, version, until: this.#now() + this.#windowMs });
    return true;
  }

  /** An instance of the function is starting: its first call no longer needs a warm worker of its own. */
  started(fn: string): void {
    this.#expected.delete(fn);
  }

  /** The function is gone, or no longer uses its environment's pool. */
  forget(fn: string): void {
    this.#expected.delete(fn);
    this.#seen.delete(fn);
  }

  /** The functions of environment `env` whose first call is expected now. */
  count(env: string): number {
    const now = this.#now();
    let n = 0;
    for (const [fn, e] of this.#expected) {
      if (e.until <= now) this.#expected.delete(fn);
      else if (e.env === env) n++;
    }
    return n;
  }
}
