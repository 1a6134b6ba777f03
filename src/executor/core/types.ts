// What the instance core (instance-core.ts) and an executor backend say to
// each other. The core owns every function's instances, waiting requests,
// leases, scaling, rolling updates, draining and reaping; a backend only
// knows how to start and specialize an instance, how to stop one, and what
// a function's version is. Fission draws the same line with its
// `executortype` interface.
import type { FlintError } from '../../api/errors.ts';
import type { FunctionResource } from '../../api/kinds.ts';

/** One specialized instance as the core tracks it. */
export interface CoreInstance {
  /** Worker id or pod name. */
  readonly id: string;
  /** Where a lease sends the request: a Unix socket (local mode) or host:port (kubernetes mode). */
  readonly socketPath?: string;
  readonly address?: string;
  /** The function version it was specialized with. */
  readonly version: string;
  readonly startedAt: number;
  active: number;
  served: number;
  /** Leases that became long-lived connections (WebSockets). */
  longLived: number;
  lastUsed: number;
  draining: boolean;
  /** Set while draining with only long-lived connections left: stops the instance then. */
  drainDeadline?: NodeJS.Timeout;
  /** Whether it can still take a request (its process is alive). */
  usable(): boolean;
}

/** A function as the core keeps it: its newest definition, its instances and the requests waiting for one. */
export interface FunctionSlot<I extends CoreInstance = CoreInstance> {
  readonly key: string;
  fn: FunctionResource;
  version: string;
  readonly instances: Set<I>;
  /** Instances being started for it. */
  starting: number;
  /** Of `starting`, those waiting for room (the instance budget) rather than specializing. */
  blocked: number;
  /** Aborted when no request waits any more: starts blocked on room give up. */
  roomWait: AbortController;
  /** Requests waiting for a slot, oldest first. */
  readonly waiting: number;
}

export type StartReason = 'demand' | 'rollout' | 'minScale';

/** Thrown by a backend's start when nobody waits for the instance any more (it gave up waiting for room). */
export const START_ABANDONED = new Error('no request waits for this instance any more');

export interface InstanceBackend<I extends CoreInstance> {
  /**
   * Starts and specializes one instance of `slot.fn` at `version`. Rejects
   * with START_ABANDONED when it waited for room and no request waits any more.
   * `why`: `demand` when requests wait for it; `rollout` or `minScale` when
   * none does yet (instances of the old version serve meanwhile), so a
   * backend may start it at a lower priority than the ones serving.
   */
  startInstance(slot: FunctionSlot<I>, version: string, why: StartReason): Promise<I>;
  /** Stops a retired instance; `immediate` (a timed-out or never-used one) skips its grace period. */
  stopInstance(slot: FunctionSlot<I>, inst: I, why: string, immediate: boolean): void;
  /** The function's version: a change starts new instances and drains the old ones. */
  versionOf(fn: FunctionResource): string;
  /** The most instances the function may have at once (concurrency, maxScale, or a backend rule). */
  maxInstances(fn: FunctionResource): number;
  /** A line for the function's log (`flint fn log`), as the executor's own. */
  log(fn: FunctionResource, line: string): void;
  /** Why a request waited too long when starts were blocked on room; undefined: the queue's own reason. */
  roomError?(slot: FunctionSlot<I>, waitedSeconds: number): FlintError | undefined;
}
