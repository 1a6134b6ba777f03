// The most worker processes, and the most memory they may be given, for all
// functions together. Each worker has its own caps (heap, cgroup), but a
// function's concurrency defaults to 500 and nothing else bounded their sum:
// enough slow traffic would start more workers than the machine holds, and
// the kernel's OOM killer, not Flint, would choose what dies. Every worker
// (warm pool workers included) holds a reservation from the moment it is
// started until it has exited.
import os from 'node:os';

export interface BudgetLimits {
  maxInstances: number;
  maxMemoryMB: number;
}

/** Install values at 0 are derived: three quarters of the machine's memory, and as many instances as fit in it at the default worker size. */
export function budgetLimits(set: { maxInstances: number; maxMemoryMB: number }, workerMemoryMB: number, totalMemoryBytes = os.totalmem()): BudgetLimits {
  const maxMemoryMB = set.maxMemoryMB > 0 ? set.maxMemoryMB : Math.max(workerMemoryMB, Math.floor((totalMemoryBytes / 1024 / 1024) * 0.75));
  const maxInstances = set.maxInstances > 0 ? set.maxInstances : Math.max(1, Math.floor(maxMemoryMB / workerMemoryMB));
  return { maxInstances, maxMemoryMB };
}

export interface Reservation {
  readonly memoryMB: number;
  /** Gives the reservation back; later calls do nothing. */
  release(): void;
}

export class InstanceBudget {
  readonly limits: BudgetLimits;
  #instances = 0;
  #memoryMB = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(limits: BudgetLimits) {
    this.limits = limits;
  }

  get instances(): number {
    return this.#instances;
  }

  get memoryMB(): number {
    return this.#memoryMB;
  }

  /** Whether a worker of `memoryMB` fits now. */
  fits(memoryMB: number): boolean {
    return this.#instances + 1 <= this.limits.maxInstances && this.#memoryMB + memoryMB <= this.limits.maxMemoryMB;
  }

  /** A reservation for one worker of `memoryMB`, or undefined when it does not fit. */
  reserve(memoryMB: number): Reservation | undefined {
    if (!this.fits(memoryMB)) return undefined;
    this.#instances++;
    this.#memoryMB += memoryMB;
    let held = true;
    return {
      memoryMB,
      release: () => {
        if (!held) return;
        held = false;
        this.#instances--;
        this.#memoryMB -= memoryMB;
        // Everyone waiting looks again: a small worker may fit where a big one did not.
        for (const wake of this.#waiting.splice(0)) wake();
      },
    };
  }

  /** Resolves at the next release (or at once when `signal` aborts). */
  nextRelease(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) {
        resolve();
        return;
      }
      const wake = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.#waiting.indexOf(wake);
        if (i >= 0) this.#waiting.splice(i, 1);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(wake);
    });
  }

  /** What a refusal says: which limit is spent. */
  describe(memoryMB: number): string {
    const { maxInstances, maxMemoryMB } = this.limits;
    if (this.#instances + 1 > maxInstances) return `all ${maxInstances} instances of executor.maxInstances are in use`;
    return `${this.#memoryMB} of executor.maxMemoryMB=${maxMemoryMB} MB are in use and an instance needs ${memoryMB} MB`;
  }
}
