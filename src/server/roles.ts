// Which components one `flint server` process runs. Local mode, and
// kubernetes mode's `role: all`, run every one in one process. The chart
// runs them apart (docs/kubernetes.md): `controller` (the API, archives,
// builds, the archive GC), `executor` (function pods, message-queue
// triggers, Ingresses) and `router` (stateless, N replicas). Of the first
// two several replicas may run; their singletons run only in the replica
// holding the role's Lease.
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { FlintError } from '../api/errors.ts';
import type { Values } from '../config/values.ts';
import type { KubeClient } from '../store/kube-client.ts';
import { LEADER_URL_ANNOTATION, LeaderElection } from '../store/leader-election.ts';

export type Role = Values['role'];

export interface Runs {
  role: Role;
  controller: boolean;
  executor: boolean;
  router: boolean;
  /** The role's singletons wait for its Lease (several replicas may run). */
  elected: boolean;
}

export function rolesOf(values: Values): Runs {
  const role = values.role;
  if (values.mode === 'local' && role !== 'all') {
    throw new FlintError('FLINT_ERR_CONFIG', `install value 'role' is '${role}', but local mode runs every component in one process: use role all, or mode kubernetes`, { field: 'role' });
  }
  if ((role === 'controller' || role === 'executor') && !values.kubernetes.routerUrl) {
    throw new FlintError('FLINT_ERR_CONFIG', `install value 'kubernetes.routerUrl' is empty, but role ${role} runs without a router of its own and must reach the routers' Service`, {
      field: 'kubernetes.routerUrl',
    });
  }
  return {
    role,
    controller: role === 'all' || role === 'controller',
    executor: role === 'all' || role === 'executor',
    router: role === 'all' || role === 'router',
    elected: role === 'controller' || role === 'executor',
  };
}

/** This process among a role's candidates: the pod's name, and a suffix, since a restarted pod keeps its name. */
export function candidateIdentity(): string {
  return `${os.hostname()}_${randomBytes(4).toString('hex')}`;
}

/** Polls `read` until it gives a value (something another component makes at its start). */
export async function waitFor<T>(what: string, read: () => Promise<T | undefined>, timeoutMs: number, onWait: (what: string) => void): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let told = false;
  for (;;) {
    const v = await read().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new FlintError('FLINT_ERR_UNAVAILABLE', `${what} did not appear within ${timeoutMs / 1000} s`);
    if (!told) onWait(what);
    told = true;
    await new Promise((r) => setTimeout(r, 500));
  }
}

export interface Singleton {
  start(): Promise<void>;
}

export interface ElectedOptions {
  client: KubeClient;
  namespace: string;
  role: Role;
  identity: string;
  singletons: Singleton[];
  values: Values['kubernetes']['leaderElection'];
  /** Published on the Lease while this replica leads (the executor service's URL). */
  leaderUrl?: string;
  logger: Logger;
  /** Leadership lost without a stop: the singletons may be running beside a new leader's, so the process must go. */
  onLost(why: string): void;
}

/** Campaigns for the role's Lease; the singletons start once this replica leads. */
export function runElected(o: ElectedOptions): { stop(): Promise<void> } {
  const election = new LeaderElection({
    client: o.client,
    namespace: o.namespace,
    name: `flint-${o.role}`,
    role: o.role,
    identity: o.identity,
    leaseDurationMs: o.values.leaseDurationSeconds * 1000,
    retryMs: o.values.retryPeriodSeconds * 1000,
    annotations: o.leaderUrl ? { [LEADER_URL_ANNOTATION]: o.leaderUrl } : undefined,
    onStartedLeading: async () => {
      for (const s of o.singletons) await s.start();
      o.logger.info({ role: o.role }, 'leading: the singletons run here');
    },
    onStoppedLeading: () => o.onLost(`lost the Lease flint-${o.role}`),
    logger: o.logger,
  });
  election.start();
  return { stop: () => election.stop() };
}
