// How many worker processes start at once. A worker's start (sandbox, runtime
// boot, until its health probe answers) is almost all CPU. When a burst needs
// more of them than the machine has cores, starting them all at once shares
// the cores among all of them and every one finishes near the end of the
// burst; starting about as many as there are cores, in arrival order,
// finishes the same work in the same total time (less, without the
// thrashing), but the first ones are ready after one start's time, the
// median after half the burst's. Starts a request waits for go before warm
// workers for a pool. The executor's default is the cores plus one: a start
// also waits (its exec, its socket appearing), and one more start keeps the
// cores busy meanwhile. On 2 cores a 20-function storm measured p50 1.52x
// of 20 concurrent forks with 2 slots, 1.07-1.41x with 3, 1.36x with 4, and
// 2.63x without the gate (bench/RESULTS.md).
//
// A start that holds its slot longer than `holdCapMs` (a runtime slow to boot
// on this machine, a sandbox waiting on I/O) gives it up and goes on
// unthrottled, so that one slow start never holds up the others for long.

export type StartPriority = 'demand' | 'background';

/** Gives the slot back; idempotent. */
export type Release = () => void;

interface Waiter {
  grant: (release: Release) => void;
}

export class StartGate {
  readonly #slots: number;
  readonly #holdCapMs: number;
  #held = 0;
  readonly #demand: Waiter[] = [];
  readonly #background: Waiter[] = [];

  /** `slots`: starts at once (at least 1); `holdCapMs`: the longest one start keeps its slot. */
  constructor(slots: number, holdCapMs: number) {
    if (!Number.isSafeInteger(slots) || slots < 1) throw new RangeError(`a start gate needs at least one slot, got ${slots}`);
    this.#slots = slots;
    this.#holdCapMs = holdCapMs;
  }

  /** How many starts may hold a slot at once. */
  get slots(): number {
    return this.#slots;
  }

  /** Starts holding a slot now. */
  get held(): number {
    return this.#held;
  }

  /** Starts waiting for a slot now. */
  get waiting(): number {
    return this.#demand.length + this.#background.length;
  }

  /** Resolves with a release once a slot is free; demand waiters are served before background ones, each in arrival order. */
  acquire(priority: StartPriority): Promise<Release> {
    if (this.#held < this.#slots && this.waiting === 0) return Promise.resolve(this.#take());
    return new Promise((grant) => (priority === 'demand' ? this.#demand : this.#background).push({ grant }));
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

  #take(): Release {
    this.#held++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(cap);
      this.#held--;
      this.#next();
    };
    const cap = setTimeout(release, this.#holdCapMs);
    cap.unref();
    return release;
  }

  #next(): void {
    while (this.#held < this.#slots) {
      const w = this.#demand.shift() ?? this.#background.shift();
      if (!w) return;
      w.grant(this.#take());
    }
  }
}
