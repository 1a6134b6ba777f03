// An Executor for router tests: leases real sockets, records what the router
// tells it. Functions map to a worker socket, or to an error acquire raises.
import type { FunctionResource } from '../../api/kinds.ts';
import type { Executor, Lease } from '../../executor/types.ts';

export type Outcome = 'ok' | 'unreachable' | 'timeout';

export interface Placement {
  socketPath?: string;
  address?: string;
  error?: Error;
  /** Resolve only when the caller's signal aborts (rejects then). */
  hang?: boolean;
  /** Where the function is placed once this placement has been leased once (an instance that died, and its replacement). */
  next?: Placement;
}

export interface Release {
  fn: string;
  instanceId: string;
  outcome: Outcome;
}

export class FakeExecutor implements Executor {
  /** `namespace/name` -> placement; `default` is used for any other function. */
  readonly placements = new Map<string, Placement>();
  readonly releases: Release[] = [];
  readonly acquired: string[] = [];
  /** Functions acquired at least once: later leases are warm. */
  readonly #warm = new Set<string>();
  #next = 0;
  aborted = 0;
  readonly fallback: Placement;

  constructor(fallback: Placement) {
    this.fallback = fallback;
  }

  /** Warm placements lease at once, as the real executor's idle instances do. */
  tryAcquire(fn: FunctionResource): Lease | undefined {
    const key = `${fn.metadata.namespace}/${fn.metadata.name}`;
    const p = this.placements.get(key) ?? this.fallback;
    if (p.error || p.hang || !this.#warm.has(key)) return undefined;
    this.acquired.push(key);
    return this.#lease(key, p);
  }

  async acquire(fn: FunctionResource, signal?: AbortSignal): Promise<Lease> {
    const key = `${fn.metadata.namespace}/${fn.metadata.name}`;
    this.acquired.push(key);
    const p = this.placements.get(key) ?? this.fallback;
    if (p.error) throw p.error;
    if (p.hang) {
      return new Promise<Lease>((_resolve, reject) => {
        signal?.addEventListener('abort', () => {
          this.aborted++;
          reject(new Error('aborted'));
        });
      });
    }
    return this.#lease(key, p);
  }

  #lease(key: string, p: Placement): Lease {
    if (p.next) this.placements.set(key, p.next);
    const coldStart = !this.#warm.has(key);
    this.#warm.add(key);
    const instanceId = `i${++this.#next}`;
    let released = false;
    return {
      socketPath: p.socketPath,
      address: p.address,
      instanceId,
      coldStart,
      release: (outcome = 'ok') => {
        if (released) return;
        released = true;
        this.releases.push({ fn: key, instanceId, outcome });
      },
    };
  }

  async start(): Promise<void> {}
  async stop(): Promise<void> {}
}
