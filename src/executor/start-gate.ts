// How many worker processes start at once. A worker's start (sandbox, runtime
// boot, until its health probe answers) is almost all CPU. When a burst needs
// more of them than the machine has cores, starting them all at once shares
// the cores among all of them and every one finishes near the end of the
// burst; starting about as many as there are cores, in arrival order,
// finishes the same work in the same total time (less, without the
// thrashing), but the first ones are ready after one start's time, the
// median after half the burst's. The executor's default is twice the cores:
// a start also waits (its exec, cgroupfs, its socket appearing) and keeps a
// core only half to two thirds busy. On 2 cores a 20-function storm measured
// p50 1.5x of 20 concurrent forks with 2 slots, 1.1-1.4x with 3 or 4, and
// 2.6x without the gate; a 100-function one 0.92-0.95x with 4 and 1.02-1.07x
// with 3 (bench/RESULTS.md).
//
// Warm workers for a pool (started at nice 10, off any request's path) wait
// while any start a request waits for runs or waits, and never take its
// place: refilling a pool the moment a burst emptied it had two of them
// holding two of the three places for 250 ms of the burst's first 300.
//
// A start that holds its slot longer than `holdCapMs` (a runtime slow to boot
// on this machine, a sandbox waiting on I/O) gives it up and goes on
// unthrottled, so that one slow start never holds up the others for long.
// A background start that has waited `promoteAfterMs` joins the queue of
// those a request waits for: cold starts without end (more functions called
// for the first time than the machine can start) must not stall a rollout's
// new instances, or a pool, for good.

export type StartPriority = 'demand' | 'background';

/** Gives the slot back; idempotent. */
export type Release = () => void;

type Grant = (release: Release) => void;

export interface StartGateOptions {
  /** The longest one start keeps its slot. */
  holdCapMs: number;
  /** How long a background start waits before it queues as a start a request waits for. */
  promoteAfterMs: number;
}

export class StartGate {
  readonly #slots: number;
  readonly #holdCapMs: number;
  readonly #promoteAfterMs: number;
  readonly #held: Record<StartPriority, number> = { demand: 0, background: 0 };
  readonly #waiters: Record<StartPriority, Grant[]> = { demand: [], background: [] };

  /** `slots`: starts of a kind at once (at least 1). */
  constructor(slots: number, o: StartGateOptions) {
    if (!Number.isSafeInteger(slots) || slots < 1) throw new RangeError(`a start gate needs at least one slot, got ${slots}`);
    this.#slots = slots;
    this.#holdCapMs = o.holdCapMs;
    this.#promoteAfterMs = o.promoteAfterMs;
  }

  /** How many starts of a kind may hold a slot at once. */
  get slots(): number {
    return this.#slots;
  }

  /** Starts holding a slot now. */
  get held(): number {
    return this.#held.demand + this.#held.background;
  }

  /** Starts waiting for a slot now. */
  get waiting(): number {
    return this.#waiters.demand.length + this.#waiters.background.length;
  }

  /**
   * Resolves with a release once the start may go, each kind in arrival order. A start a request waits for goes
   * while fewer than `slots` of its kind run: warm workers being started for a pool run at a lower priority and do
   * not hold it up. Those wait until no start a request waits for runs or waits, and then also take `slots` at most.
   */
  acquire(priority: StartPriority): Promise<Release> {
    if (this.#waiters[priority].length === 0 && this.#mayStart(priority)) return Promise.resolve(this.#take(priority));
    return new Promise((grant) => {
      this.#waiters[priority].push(grant);
      if (priority === 'background') setTimeout(() => this.#promote(grant), this.#promoteAfterMs).unref();
    });
  }

  /** `start` while holding a slot: the slot goes back when it settles, or after `holdCapMs`. */
  async run<T>(priority: StartPriority, start: () => Promise<T>): Promise<T> {
    const release = await this.acquire(priority);
    try {
      return await start();
    } finally {
      release();
    }
  }

  #mayStart(priority: StartPriority): boolean {
    if (priority === 'demand') return this.#held.demand < this.#slots;
    return this.#held.demand === 0 && this.#waiters.demand.length === 0 && this.#held.background < this.#slots;
  }

  #take(priority: StartPriority): Release {
    this.#held[priority]++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(cap);
      this.#held[priority]--;
      this.#next();
    };
    const cap = setTimeout(release, this.#holdCapMs);
    cap.unref();
    return release;
  }

  /** A background waiter still waiting joins the end of the demand queue. */
  #promote(grant: Grant): void {
    const i = this.#waiters.background.indexOf(grant);
    if (i < 0) return;
    this.#waiters.background.splice(i, 1);
    this.#waiters.demand.push(grant);
    this.#next();
  }

  #next(): void {
    for (const priority of ['demand', 'background'] as const) {
      const queue = this.#waiters[priority];
      while (queue.length > 0 && this.#mayStart(priority)) queue.shift()?.(this.#take(priority));
    }
  }
}
