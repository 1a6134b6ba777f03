// The canary controller: for each CanaryConfig still `pending`, once every
// interval it reads the new function's requests and 5xx answers over that
// interval from the routers' counters (counters.ts) and moves the route's
// weights one step from the old function to the new one, or all the way back
// (stepping.ts says which).
//
// Everything it knows lives in the store, so a restart (or a new leader, in
// kubernetes mode) carries on where the last one stopped: the weights are the
// route's own, and the canary's status records when they last moved
// (`lastStepTime`); the next step comes one interval after that. Counts are
// not kept: after a restart the first interval is judged on what the routers
// counted since the controller took the canary up again.
//
// Each move writes the route first, then the status. A stop between the two
// can make the next step come early (the route moved, the time did not), and
// a rollback whose status was not written is recognized at the next start
// (the route gives the new function nothing while the status says it had
// some) and recorded as failed.
import type { Logger } from 'pino';
import { isNewRollout, isRollingOut } from '../api/canary.ts';
import { parseDuration } from '../api/duration.ts';
import type { CanaryConfig, CanaryConfigStatus, HTTPTrigger } from '../api/kinds.ts';
import type { Store, Watch } from '../store/store.ts';
import { CountWindow, type Counts, type RequestCounters } from './counters.ts';
import { DEFAULT_INTERVAL, decide, routeProblem } from './stepping.ts';

export interface CanaryControllerOptions {
  store: Store;
  counters: RequestCounters;
  logger: Logger;
  /** After a round that failed (the store unreachable, the route changed under it): try again this soon, or after one interval if that is shorter. */
  retryMs?: number;
}

interface Tracked {
  key: string;
  namespace: string;
  name: string;
  uid: string;
  generation: number;
  window: CountWindow;
  timer: NodeJS.Timeout | undefined;
  /** This canary's rounds, one after another. */
  chain: Promise<void>;
  dropped: boolean;
  intervalMs: number;
  /** The status of a move whose route write went through and whose status write did not (yet): written before anything else. */
  unwritten?: CanaryConfigStatus;
}

/** Longest single timer; longer intervals are waited out in several. */
const MAX_TIMER_MS = 3_600_000;

const keyOf = (cc: CanaryConfig) => `${cc.metadata.namespace}/${cc.metadata.name}`;

export function intervalOf(cc: CanaryConfig): number {
  return parseDuration(cc.spec.duration ?? DEFAULT_INTERVAL) ?? 120_000;
}

export class CanaryController {
  readonly #o: CanaryControllerOptions;
  readonly #tracked = new Map<string, Tracked>();
  #watch: Watch | undefined;
  #stopped = false;

  constructor(o: CanaryControllerOptions) {
    this.#o = o;
  }

  async start(): Promise<void> {
    this.#stopped = false;
    const { items, resourceVersion } = await this.#o.store.list('CanaryConfig');
    for (const cc of items) this.#seen(cc);
    this.#watch = this.#o.store.watch({ kind: 'CanaryConfig', sinceResourceVersion: resourceVersion }, (ev) => {
      const cc = ev.object as CanaryConfig;
      if (ev.type === 'DELETED') this.#drop(keyOf(cc));
      else this.#seen(cc);
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#watch?.close();
    const chains = [...this.#tracked.values()].map((t) => t.chain);
    for (const key of [...this.#tracked.keys()]) this.#drop(key);
    await Promise.all(chains);
  }

  /** Canaries being rolled out here (tests, status). */
  active(): string[] {
    return [...this.#tracked.keys()];
  }

  #seen(cc: CanaryConfig): void {
    if (this.#stopped) return;
    const key = keyOf(cc);
    const t = this.#tracked.get(key);
    if (!isRollingOut(cc)) {
      if (t) this.#drop(key);
      return;
    }
    // The controller's own status writes, and changes of labels: nothing new to do.
    if (t && t.uid === cc.metadata.uid && t.generation === cc.metadata.generation) return;
    // A new spec is a new rollout (the control plane reset the status to pending).
    if (t) this.#drop(key);
    const next: Tracked = {
      key,
      namespace: cc.metadata.namespace,
      name: cc.metadata.name,
      uid: cc.metadata.uid,
      generation: cc.metadata.generation,
      window: new CountWindow(`${cc.metadata.namespace}/${cc.spec.newfunction}`),
      timer: undefined,
      chain: Promise.resolve(),
      dropped: false,
      intervalMs: intervalOf(cc),
    };
    this.#tracked.set(key, next);
    this.#run(next, () => this.#adopt(next, cc));
  }

  #drop(key: string): void {
    const t = this.#tracked.get(key);
    if (!t) return;
    t.dropped = true;
    clearTimeout(t.timer);
    this.#tracked.delete(key);
  }

  /** Queues a round for this canary; a failed one is retried. */
  #run(t: Tracked, round: () => Promise<void>): void {
    t.chain = t.chain
      .then(() => (t.dropped ? undefined : round()))
      .catch((err) => {
        if (t.dropped) return;
        this.#o.logger.warn({ err, canary: t.key }, 'canary round failed; trying again');
        this.#schedule(t, Date.now() + Math.min(this.#o.retryMs ?? 5000, t.intervalMs));
      });
  }

  #schedule(t: Tracked, due: number): void {
    if (t.dropped || this.#stopped) return;
    clearTimeout(t.timer);
    const wait = Math.min(Math.max(0, due - Date.now()), MAX_TIMER_MS);
    t.timer = setTimeout(() => {
      if (Date.now() < due) this.#schedule(t, due);
      else this.#run(t, () => this.#round(t));
    }, wait);
  }

  async #read(t: Tracked): Promise<Counts | undefined> {
    try {
      return t.window.advance(await this.#o.counters.read());
    } catch (err) {
      this.#o.logger.warn({ err, canary: t.key }, "reading the routers' counters failed");
      return undefined;
    }
  }

  /** The canary as stored now, if it is still the one this round is for. */
  async #current(t: Tracked): Promise<CanaryConfig | undefined> {
    const cc = await this.#o.store.get('CanaryConfig', t.namespace, t.name);
    if (!cc || cc.metadata.uid !== t.uid || cc.metadata.generation !== t.generation || !isRollingOut(cc) || t.dropped) return undefined;
    return cc;
  }

  /**
   * Writes the status over the version just read, while it is still this rollout; a write that crossed another
   * (a label changed) is tried again on a fresh read, so a step whose route already moved is never taken twice.
   */
  async #writeStatus(t: Tracked, status: CanaryConfigStatus): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const cc = await this.#current(t);
      if (!cc) return;
      try {
        await this.#o.store.updateStatus({ ...cc, status: { ...status, observedGeneration: t.generation } });
        break;
      } catch (err) {
        if ((err as { code?: string }).code !== 'FLINT_ERR_CONFLICT' || attempt >= 5) throw err;
      }
    }
    if (status.status !== 'pending') this.#o.logger.info({ canary: t.key, status: status.status }, status.message);
  }

  async #route(cc: CanaryConfig): Promise<HTTPTrigger | undefined> {
    return this.#o.store.get('HTTPTrigger', cc.metadata.namespace, cc.spec.trigger);
  }

  /** Takes a canary up: records the start of a new spec's rollout, or carries on from the recorded one. */
  async #adopt(t: Tracked, cc: CanaryConfig): Promise<void> {
    const ht = await this.#route(cc);
    const ref = ht?.spec.functionref;
    // The control plane refuses a bad interval; one written around it (kubectl) that means no time at all stops here.
    const interval = cc.spec.duration ?? DEFAULT_INTERVAL;
    const badInterval = !((parseDuration(interval) ?? 0) > 0);
    const problem = badInterval ? `spec.duration: '${interval}' is not a duration of some time (30s, 2m, 1h30m)` : routeProblem(cc.spec, ref);
    // A new spec starts from nothing the status says of the one before.
    const fresh = isNewRollout(cc);
    if (problem) {
      await this.#writeStatus(t, { ...(fresh ? {} : cc.status), status: 'aborted', message: `${problem}: the canary stopped, the route's weights are left as they are` });
      return;
    }
    const { newfunction: newFn, oldfunction: oldFn } = cc.spec;
    const weight = ref?.functionweights?.[newFn] ?? 0;
    let stepped = fresh ? Number.NaN : Date.parse(cc.status?.lastStepTime ?? '');
    if (Number.isNaN(stepped)) {
      stepped = Date.now();
      await this.#writeStatus(t, {
        status: 'pending',
        newWeight: weight,
        lastStepTime: new Date(stepped).toISOString(),
        message: `rolling out from '${oldFn}' to '${newFn}': '${newFn}' at ${weight}%, next step after ${cc.spec.duration ?? DEFAULT_INTERVAL}`,
      });
    } else if (weight === 0 && (cc.status?.newWeight ?? 0) > 0) {
      await this.#writeStatus(t, {
        ...cc.status,
        status: 'failed',
        newWeight: 0,
        message: `the route gives '${newFn}' nothing although the rollout had it at ${cc.status?.newWeight}%: rolled back (before a restart, or by hand); all its traffic is on '${oldFn}'`,
      });
      return;
    }
    await this.#read(t);
    this.#schedule(t, stepped + t.intervalMs);
  }

  /** The end of an interval: judge it, and step, hold, roll back or stop. */
  async #round(t: Tracked): Promise<void> {
    if (t.unwritten) {
      // The route moved in a round whose status write failed: record that move rather than make another.
      const status = t.unwritten;
      await this.#writeStatus(t, status);
      t.unwritten = undefined;
      if (status.status === 'pending') this.#schedule(t, Date.parse(status.lastStepTime as string) + t.intervalMs);
      return;
    }
    const cc = await this.#current(t);
    if (!cc) return;
    const window = await this.#read(t);
    const ht = await this.#route(cc);
    const interval = cc.spec.duration ?? DEFAULT_INTERVAL;
    const missing = [];
    for (const f of [cc.spec.newfunction, cc.spec.oldfunction]) if (!(await this.#o.store.get('Function', t.namespace, f))) missing.push(f);
    const d =
      missing.length > 0
        ? { action: 'abort' as const, message: `function '${missing[0]}' no longer exists: the canary stopped, the route's weights are left as they are` }
        : decide(cc.spec, ht?.spec.functionref, window, interval);
    switch (d.action) {
      case 'abort':
        await this.#writeStatus(t, { ...cc.status, status: 'aborted', message: d.message });
        return;
      case 'hold':
        if (cc.status?.message !== d.message) await this.#writeStatus(t, { ...cc.status, status: 'pending', message: d.message });
        this.#schedule(t, Date.now() + t.intervalMs);
        return;
      case 'step':
      case 'rollback': {
        const route = ht as HTTPTrigger;
        // With the route's resourceVersion: a route changed meanwhile fails the round, which is tried again on fresh reads.
        await this.#o.store.update({ ...route, spec: { ...route.spec, functionref: { ...route.spec.functionref, functionweights: d.weights } } });
        // When the weights moved: the next interval counts from here.
        const now = Date.now();
        const rollback = d.action === 'rollback';
        t.unwritten = {
          status: rollback ? 'failed' : d.done ? 'succeeded' : 'pending',
          message: d.message,
          ...(d.rate === undefined ? {} : { failureRate: d.rate, requests: d.requests }),
          newWeight: rollback ? 0 : d.newWeight,
          lastStepTime: new Date(now).toISOString(),
        };
        await this.#writeStatus(t, t.unwritten);
        t.unwritten = undefined;
        if (d.action === 'step' && !d.done) this.#schedule(t, now + t.intervalMs);
        return;
      }
    }
  }
}
