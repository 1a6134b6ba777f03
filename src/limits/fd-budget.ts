// How the process's file descriptors are shared between its listeners when
// the install values leave a cap at 0 (derived). Router, ingress and control
// plane run in one process in local mode, so each gets its own slice of one
// limit, and a quarter is left for what is not a client connection:
// connections to instances and brokers, function logs, archives, builds.
import fs from 'node:fs';

/** Shares of the fd limit, per listener. The control plane's is small: only the administrator talks to it. */
const SHARES = { router: 0.5, ingress: 0.1, controller: 0.05 } as const;
export type Listener = keyof typeof SHARES;

/** A floor so a tiny limit still leaves each listener something to work with. */
const MIN_CAP = 64;

/** The soft limit on open files (RLIMIT_NOFILE), read from /proc; 1024 where it cannot be read. */
export function openFileLimit(limitsFile = '/proc/self/limits'): number {
  try {
    const line = fs.readFileSync(limitsFile, 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    const soft = line?.split(/\s{2,}/)[1];
    if (soft === 'unlimited') return 1 << 20;
    const n = Number(soft);
    if (Number.isInteger(n) && n > 0) return n;
  } catch {}
  return 1024;
}

export interface ListenerCaps {
  maxConnections: number;
  maxConnectionsPerClient: number;
}

/**
 * The caps of one listener: the install values where set (non-zero), else
 * its share of `fdLimit`, and half of that for one client address, so one
 * client cannot take a listener whole.
 */
export function listenerCaps(listener: Listener, set: { maxConnections: number; maxConnectionsPerClient: number }, fdLimit: number): ListenerCaps {
  const maxConnections = set.maxConnections > 0 ? set.maxConnections : Math.max(MIN_CAP, Math.floor(fdLimit * SHARES[listener]));
  const maxConnectionsPerClient = set.maxConnectionsPerClient > 0 ? set.maxConnectionsPerClient : Math.max(1, Math.floor(maxConnections / 2));
  return { maxConnections, maxConnectionsPerClient };
}
