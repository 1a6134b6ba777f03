// Leader election on a coordination.k8s.io Lease, as client-go's
// leaderelection package does it: whoever holds the Lease renews it; the
// others read it every retry period and take it over once it has gone
// unrenewed for its whole duration, measured on their own clock from when
// they last saw it change (so clocks that disagree cannot cut a term
// short). A leader that cannot renew for two thirds of the duration gives
// the lead up itself (by a timer: a call that hangs does not hold it up),
// before anyone may take it, so two never lead at once
// as long as the API server is the only way they learn of each other. A
// leader that stops releases the Lease, and a standby takes over at its next
// try instead of after the duration.
import type { Logger } from 'pino';
import type { GroupVersionResource, KubeClient, KubeObject } from './kube-client.ts';
import { Informer } from './kube-informer.ts';

export const LEASES: GroupVersionResource = { group: 'coordination.k8s.io', version: 'v1', resource: 'leases' };
/** On every Lease Flint elects with: which role it elects (`executor`, `controller`). */
export const LEADER_OF_LABEL = 'flint.dev/leader-of';

export interface LeaseObject extends KubeObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

export interface LeaderElectionOptions {
  client: KubeClient;
  namespace: string;
  /** The Lease's name; its label LEADER_OF_LABEL gets `role`. */
  name: string;
  role: string;
  /** This process, unique among the candidates (the pod's name and a random suffix). */
  identity: string;
  leaseDurationMs: number;
  /** How often a standby tries to take the Lease. The leader renews every third of the duration. */
  retryMs: number;
  /** Written on the Lease while this process holds it: where the leader serves. */
  annotations?: Record<string, string>;
  /** Became the leader: start the singletons. A rejection gives the lead up. */
  onStartedLeading(): Promise<void> | void;
  /** Lost the lead without stop() (renewals failed, or another took it): the singletons must stop at once. */
  onStoppedLeading(): void;
  logger: Logger;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export class LeaderElection {
  readonly #o: LeaderElectionOptions;
  #leading = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  /** Fires when the lead must be given up unless renewed first: it does not wait for a call that hangs. */
  #deadline: NodeJS.Timeout | undefined;
  /** The singletons' start, under way beside the renewals. */
  #starting: Promise<void> = Promise.resolve();
  /** The foreign record last seen, and when (this process's clock). */
  #observed: { holder: string; renewTime: string; at: number } | undefined;
  #round: Promise<void> = Promise.resolve();

  constructor(o: LeaderElectionOptions) {
    this.#o = o;
  }

  get isLeader(): boolean {
    return this.#leading;
  }

  start(): void {
    this.#schedule(0);
  }

  /** Stops campaigning; a leader releases the Lease (after the caller stopped its singletons). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#round;
    await this.#starting;
    clearTimeout(this.#deadline);
    if (!this.#leading) return;
    this.#leading = false;
    try {
      const lease = await this.#o.client.get<LeaseObject>(LEASES, this.#o.namespace, this.#o.name);
      if (lease?.spec?.holderIdentity !== this.#o.identity) return;
      const now = Date.now();
      await this.#o.client.replace(LEASES, this.#o.namespace, this.#o.name, {
        ...lease,
        spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: iso(now) },
      });
      this.#o.logger.info({ lease: this.#o.name }, 'released the leader lease');
    } catch (err) {
      // The standby then waits out the duration: slower, not wrong.
      this.#o.logger.warn({ err, lease: this.#o.name }, 'could not release the leader lease');
    }
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#round = this.#tick();
    }, ms);
  }

  async #tick(): Promise<void> {
    const { leaseDurationMs, retryMs, logger } = this.#o;
    // A term lasts two thirds of the duration from when its renewal was sent: whoever saw that renewal waits the
    // whole duration from when it saw it, later.
    const renewDeadline = (leaseDurationMs * 2) / 3;
    const sent = Date.now();
    let held = false;
    try {
      held = await this.#tryAcquireOrRenew();
    } catch (err) {
      logger.warn({ err: (err as Error).message, lease: this.#o.name }, 'leader election: the API server did not answer');
    }
    if (this.#stopped) return;
    if (held && Date.now() - sent < renewDeadline) {
      clearTimeout(this.#deadline);
      this.#deadline = setTimeout(() => this.#lose(), sent + renewDeadline - Date.now());
      if (!this.#leading) {
        this.#leading = true;
        logger.info({ lease: this.#o.name, identity: this.#o.identity }, 'became the leader');
        // Beside the renewals, which go on however long the start takes.
        this.#starting = this.#startLeading();
      }
    } else if (this.#leading && this.#observed !== undefined) {
      // Another holds it.
      this.#lose();
    }
    // (A leader whose renewals fail gives the lead up at its deadline, whether or not its calls answer.)
    this.#schedule(this.#leading ? Math.max(100, Math.floor(leaseDurationMs / 3)) : retryMs);
  }

  async #startLeading(): Promise<void> {
    try {
      await this.#o.onStartedLeading();
    } catch (err) {
      if (!this.#leading) return;
      this.#o.logger.error({ err }, 'starting as the leader failed: giving the lead up');
      this.#lose();
    }
  }

  #lose(): void {
    clearTimeout(this.#deadline);
    if (!this.#leading || this.#stopped) return;
    this.#leading = false;
    this.#o.logger.error({ lease: this.#o.name }, 'lost the leader lease');
    this.#o.onStoppedLeading();
  }

  /** One round: true while this process holds the Lease afterwards. */
  async #tryAcquireOrRenew(): Promise<boolean> {
    const { client, namespace, name, identity, leaseDurationMs } = this.#o;
    const now = Date.now();
    const mine = (lease?: LeaseObject): LeaseObject => {
      const taking = lease?.spec?.holderIdentity !== identity;
      return {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        ...lease,
        metadata: {
          ...lease?.metadata,
          name,
          namespace,
          labels: { ...lease?.metadata.labels, [LEADER_OF_LABEL]: this.#o.role },
          annotations: { ...lease?.metadata.annotations, ...this.#o.annotations },
        },
        spec: {
          holderIdentity: identity,
          leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
          acquireTime: taking ? iso(now) : (lease?.spec?.acquireTime ?? iso(now)),
          renewTime: iso(now),
          leaseTransitions: (lease?.spec?.leaseTransitions ?? 0) + (taking && lease ? 1 : 0),
        },
      };
    };
    const lease = await client.get<LeaseObject>(LEASES, namespace, name);
    // When this process saw the record: after the read answered, never earlier than the renewal it shows.
    const seen = Date.now();
    if (!lease) {
      try {
        await client.create(LEASES, namespace, mine());
        this.#observed = undefined;
        return true;
      } catch (err) {
        if ((err as { code?: string }).code === 'FLINT_ERR_ALREADY_EXISTS') return false;
        throw err;
      }
    }
    const holder = lease.spec?.holderIdentity ?? '';
    if (holder !== identity && holder !== '') {
      const renewTime = lease.spec?.renewTime ?? '';
      if (this.#observed?.holder !== holder || this.#observed.renewTime !== renewTime) this.#observed = { holder, renewTime, at: seen };
      const duration = (lease.spec?.leaseDurationSeconds ?? Math.ceil(leaseDurationMs / 1000)) * 1000;
      if (seen - this.#observed.at < duration) return false;
    }
    try {
      await client.replace(LEASES, namespace, name, mine(lease));
      this.#observed = undefined;
      return true;
    } catch (err) {
      // Another candidate wrote first: it holds the Lease this round.
      if ((err as { code?: string }).code === 'FLINT_ERR_CONFLICT') return false;
      throw err;
    }
  }
}

/** The annotation a role's leader publishes its service address in. */
export const LEADER_URL_ANNOTATION = 'flint.dev/leader-url';

/**
 * Follows who leads `role` in `namespace` (the Lease's holder and the URL it
 * publishes), for those that call the leader (the routers call the executor).
 */
export function followLeader(
  client: KubeClient,
  namespace: string,
  role: string,
  onError: (err: unknown) => void,
): { current(): { holder: string; url?: string } | undefined; ready: Promise<unknown>; stop(): Promise<void> } {
  const informer = new Informer<LeaseObject>({
    client,
    gvr: LEASES,
    namespace,
    labelSelector: `${LEADER_OF_LABEL}=${role}`,
    onChange: () => {},
    onError,
    retryDelayMs: 500,
  });
  const current = () => {
    for (const l of informer.objects()) {
      const holder = l.spec?.holderIdentity;
      if (holder) return { holder, url: l.metadata.annotations?.[LEADER_URL_ANNOTATION] };
    }
    return undefined;
  };
  return { current, ready: informer.start(), stop: () => informer.stop() };
}
