// What the routers and the executor service say to each other in
// kubernetes mode (DESIGN.md section 4, "Invoke"). A router asks the leader
// for a lease on one of a function's instances (a grant: one request slot,
// as the executor counts them) and keeps it for reuse while its traffic
// lasts, so a warm call never leaves the router; it gives grants back when
// they go idle, when a request failed on them, or when the executor revokes
// them (the instance drains). One event stream per router carries the
// revocations and tells the router which leader it speaks to: after a
// failover the router hands its grants to the new leader (reattach).
import type { FunctionResource } from '../../api/kinds.ts';

export const PATHS = {
  health: '/healthz',
  acquire: '/v1/executor/acquire',
  grants: '/v1/executor/grants',
  reattach: '/v1/executor/reattach',
  events: '/v1/executor/events',
  instances: '/v1/executor/instances',
  /** `/<namespace>/<name>?from=<byte>`: the function's log, which the leader writes (the controller serves it). */
  logs: '/v1/executor/logs',
} as const;

/** Headers of a log read (FileRange): where its text starts and the next read goes on, the file's size, and which file (on which leader) it is. */
export const LOG_HEADERS = { start: 'x-flint-log-start', next: 'x-flint-log-next', size: 'x-flint-log-size', file: 'x-flint-log-file' } as const;

export interface AcquireRequest {
  router: string;
  fn: FunctionResource;
  /**
   * The grant's id, chosen by the router (the leader makes one up without it). A router that gives up on the
   * request releases this id: the leader may have granted it already, with its answer on the way. Asked again
   * for an id it holds, the leader answers that grant again (a retry whose first answer was lost).
   */
  grant?: string;
}

export interface GrantAnswer {
  grant: string;
  /** host:port of the instance (pods); empty when it serves on a Unix socket. */
  address: string;
  /** A Unix socket (an executor on the router's own machine: the tests' process backend). */
  socketPath?: string;
  instanceId: string;
  coldStart: boolean;
  /** The leader that issued it. */
  leader: string;
  /**
   * The router's session at that leader: grant ids mean something only within it. A router gone past the grace
   * finds a new session when it comes back, its grants given back meanwhile.
   */
  session?: string;
}

export type GrantOp = { grant: string; op: 'release'; outcome: 'ok' | 'unreachable' | 'timeout' } | { grant: string; op: 'longLived' };

export interface GrantOpsRequest {
  router: string;
  ops: GrantOp[];
}

export interface ReattachRequest {
  router: string;
  grants: Array<{ fn: FunctionResource; instanceId: string }>;
}

/** In the order asked; null where the new leader has no room on that instance (or does not know it). */
export interface ReattachAnswer {
  leader: string;
  session?: string;
  grants: Array<GrantAnswer | null>;
}

/** One line of the event stream. */
export type ExecutorEvent = { leader: string; session?: string } | { revoke: string[] } | { heartbeat: number };

/** How often the event stream carries a line when nothing happens: a router that hears nothing for three of these reconnects. */
export const HEARTBEAT_MS = 5_000;
