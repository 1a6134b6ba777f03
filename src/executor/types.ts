// The executor's small public interface. The router (and anything else that
// invokes functions) uses only this; the pool manager, dedicated instances,
// scaling and reaping stay private to src/executor.
import type { FunctionResource } from '../api/kinds.ts';

/** Where one request for a function may be sent, held until released. */
export interface Lease {
  /** Unix socket the instance serves HTTP on (local mode). */
  readonly socketPath?: string;
  /** host:port the instance serves HTTP on (kubernetes mode). */
  readonly address?: string;
  /** Instance id, for logs and metrics. */
  readonly instanceId: string;
  /** True when this lease caused a specialization (a cold start). */
  readonly coldStart: boolean;
  /**
   * Gives the instance back. `outcome` tells the executor what happened so it
   * can replace an instance: `unreachable` (connection refused/reset: the
   * worker died), `timeout` (functionTimeout passed: the worker is killed and
   * replaced), `ok` otherwise. Safe to call more than once; later calls are ignored.
   */
  release(outcome?: 'ok' | 'unreachable' | 'timeout'): void;
  /**
   * The request became a connection with no end of its own (an upgrade, such
   * as a WebSocket). An instance that is draining (the function changed or
   * was deleted) and holds nothing else is stopped soon after, so old or
   * deleted code does not live on in such connections.
   */
  markLongLived?(): void;
  /**
   * The lease is not to be kept for reuse: the instance takes no new
   * requests any more (it drains: the function changed or was deleted; or
   * it is gone), or requests wait for the function's instances, so a slot
   * kept idle would starve them. A holder that keeps leases for reuse (a
   * router's cache, in kubernetes mode) gives such a lease back after its
   * request, and at once when idle.
   */
  stale?(): boolean;
}

export interface Executor {
  /**
   * An instance of `fn`'s current generation with a free request slot:
   * an idle specialized one, else one specialized from the environment's warm
   * pool, else a newly started one. Rejects with a FlintError:
   * FLINT_ERR_NOT_FOUND (environment or package missing),
   * FLINT_ERR_SPECIALIZE_FAILED (load error, syntax error, specializationTimeout),
   * FLINT_ERR_TOO_MANY_REQUESTS (concurrency cap), FLINT_ERR_UNAVAILABLE.
   */
  acquire(fn: FunctionResource, signal?: AbortSignal): Promise<Lease>;
  /**
   * An idle specialized instance of `fn`'s current generation with a free
   * slot, leased at once, or undefined when acquire() would have to wait or
   * start one. The router's fast path: a warm call costs no promise, no
   * microtask and no AbortSignal.
   */
  tryAcquire(fn: FunctionResource): Lease | undefined;
  start(): Promise<void>;
  /** Stops every instance, letting requests under way finish; a second call waits for the first. */
  stop(): Promise<void>;
}

/**
 * How long an idle connection to a worker is kept when the worker sends no
 * keep-alive hint: shorter than any runtime closes one (Go after 120 s,
 * Python never), so a request is never sent on a connection being closed.
 * The Node runtime's hint (120 s) takes precedence where it is sent.
 */
export const WORKER_IDLE_KEEPALIVE_MS = 60_000;
