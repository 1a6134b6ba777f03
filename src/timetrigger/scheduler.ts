// The time-trigger scheduler: one timer per TimeTrigger, armed for its next
// due time. A run claims its due time in the trigger's status, calls the
// function through the router's internal function path (a minted token when
// authentication is on) with X-Flint-Trigger-Name and X-Flint-Scheduled-Time,
// and writes the outcome to the status and to the function's log. When and
// how often a trigger runs is policy.ts. Like the trigger manager it is a
// singleton: in kubernetes mode only the executor replica holding the Lease
// runs it.
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Agent } from 'undici';
import { parseSchedule, rfc3339, type Schedule } from '../api/cron.ts';
import { isFlintError } from '../api/errors.ts';
import type { TimeTrigger, TimeTriggerStatus } from '../api/kinds.ts';
import type { Store, Watch } from '../store/store.ts';
import { claimed, functionPath, missedRun, startOf, unclaimed } from './policy.ts';

export interface TimeTriggerSchedulerOptions {
  store: Store;
  logger: Logger;
  routerUrl(): string;
  /** A bearer token for the router when authentication is on. */
  token?: () => string | undefined;
  /** Writes a line to the function's log; false (or absent) when this process keeps none, and the server's log gets it. */
  functionLog?: (namespace: string, name: string, line: string) => boolean;
  /** Runs of one trigger still under way past which a due time is skipped (default 10). */
  maxInFlight?: number;
  now?: () => number;
}

/** setTimeout's longest delay; a later due time is reached in steps. */
const MAX_DELAY_MS = 2 ** 31 - 1;
/** Attempts at a status write that meets concurrent writes (the scheduler's own, an update of the spec). */
const WRITE_ATTEMPTS = 8;
const ERROR_BODY_CHARS = 300;

interface Armed {
  key: string;
  uid: string;
  generation: number;
  trigger: TimeTrigger;
  schedule: Schedule;
  timer?: NodeJS.Timeout;
  stopped: boolean;
  inFlight: number;
  /** The last run's claim: claims are written in due order, so a later due time never claims ahead of an earlier one. */
  claiming: Promise<unknown>;
}

export interface RunOutcome {
  statusCode: number;
  durationMs: number;
  error?: string;
}

export class TimeTriggerScheduler {
  readonly #o: TimeTriggerSchedulerOptions;
  readonly #now: () => number;
  readonly #armed = new Map<string, Armed>();
  /** Runs under way, so stop() can cut them off and wait for their outcomes. */
  readonly #runs = new Set<Promise<void>>();
  readonly #abort = new AbortController();
  readonly #http = new Agent({ keepAliveTimeout: 30_000, connections: 64 });
  #watch: Watch | undefined;
  #stopped = false;

  constructor(opts: TimeTriggerSchedulerOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
  }

  async start(): Promise<void> {
    const { items, resourceVersion } = await this.#o.store.list('TimeTrigger');
    for (const t of items) this.#upsert(t);
    this.#watch = this.#o.store.watch({ kind: 'TimeTrigger', sinceResourceVersion: resourceVersion }, (ev) => {
      const t = ev.object as TimeTrigger;
      if (ev.type === 'DELETED') this.#remove(t);
      else this.#upsert(t);
    });
  }

  /** Stops every schedule; runs under way are cut off and their outcome written. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#watch?.close();
    for (const a of this.#armed.values()) this.#disarm(a);
    this.#armed.clear();
    this.#abort.abort();
    await Promise.allSettled([...this.#runs]);
    await this.#http.close().catch(() => {});
  }

  /** Triggers with an armed schedule (tests, metrics). */
  active(): string[] {
    return [...this.#armed.keys()];
  }

  #upsert(t: TimeTrigger): void {
    if (this.#stopped) return;
    const key = `${t.metadata.namespace}/${t.metadata.name}`;
    const generation = t.metadata.generation ?? 1;
    const cur = this.#armed.get(key);
    if (cur && cur.uid === t.metadata.uid && cur.generation === generation) {
      cur.trigger = t;
      return;
    }
    if (cur) this.#disarm(cur);
    this.#armed.delete(key);
    let schedule: Schedule;
    try {
      schedule = parseSchedule(t.spec.cron);
    } catch (err) {
      // Validation refuses such a trigger; one written around it (kubectl) is reported, not run.
      this.#o.logger.warn({ trigger: key, cron: t.spec.cron, err: (err as Error).message }, 'time trigger not scheduled: bad spec.cron');
      return;
    }
    const a: Armed = { key, uid: t.metadata.uid, generation, trigger: t, schedule, stopped: false, inFlight: 0, claiming: Promise.resolve() };
    this.#armed.set(key, a);
    this.#track(this.#begin(a));
  }

  #remove(t: TimeTrigger): void {
    const key = `${t.metadata.namespace}/${t.metadata.name}`;
    const cur = this.#armed.get(key);
    if (!cur || cur.uid !== t.metadata.uid) return;
    this.#disarm(cur);
    this.#armed.delete(key);
  }

  #disarm(a: Armed): void {
    a.stopped = true;
    if (a.timer) clearTimeout(a.timer);
    a.timer = undefined;
  }

  #track(p: Promise<void>): void {
    const tracked = p.catch((err) => this.#o.logger.error({ err }, 'time trigger run failed'));
    this.#runs.add(tracked);
    void tracked.finally(() => this.#runs.delete(tracked));
  }

  /** Records where the schedule starts (a new spec), makes up a missed run, and arms the timer. */
  async #begin(a: Armed): Promise<void> {
    const now = this.#now();
    const { anchor, activate } = startOf(a.trigger, now);
    // Where the schedule starts must be on record before it runs; a store that fails (an API server restarting) is tried again.
    for (let attempt = 1; activate && !a.stopped; attempt++) {
      try {
        if (!(await this.#writeStatus(a, () => activate))) return;
        break;
      } catch (err) {
        this.#o.logger.warn({ trigger: a.key, err: (err as Error).message }, 'time trigger not scheduled yet: its status could not be written; retrying');
        await delay(Math.min(250 * 2 ** (attempt - 1), 5000), undefined, { signal: this.#abort.signal }).catch(() => {});
      }
    }
    if (a.stopped) return;
    const missed = missedRun(a.schedule, anchor, now);
    // The missed run claims before any due time the timer reaches.
    const makeUp = missed === undefined ? undefined : this.#run(a, missed, true);
    this.#arm(a, now);
    await makeUp;
  }

  /** Arms the timer for the first due time after `after`. */
  #arm(a: Armed, after: number): void {
    if (a.stopped) return;
    const due = a.schedule.next(after);
    if (due === undefined) {
      this.#o.logger.info({ trigger: a.key }, 'time trigger has no due time left');
      return;
    }
    const wait = () => {
      const left = due - this.#now();
      if (left > 0) {
        a.timer = setTimeout(wait, Math.min(left, MAX_DELAY_MS));
        return;
      }
      a.timer = undefined;
      // Late (a busy event loop, a suspended machine): the due times that passed meanwhile make one run, the latest.
      const now = this.#now();
      const latest = Math.max(a.schedule.latest(now) ?? due, due);
      if (latest > due) {
        const log = this.#o.logger.child({ trigger: a.key });
        this.#note(a, `time trigger '${a.trigger.metadata.name}' woke ${now - due} ms after its due time ${rfc3339(due)}: the due times up to ${rfc3339(latest)} make one run`, log, 'warn');
      }
      // This run joins the claim queue before the next due time can (arming may run it at once).
      this.#track(this.#run(a, latest, false));
      this.#arm(a, now);
    };
    wait();
  }

  /**
   * Writes the status `make` derives from the stored one, retrying on
   * concurrent writes; false when the trigger is gone or no longer this spec
   * (its own event stops this schedule), or `make` declines (undefined).
   */
  async #writeStatus(a: Armed, make: (status: TimeTriggerStatus | undefined) => TimeTriggerStatus | undefined): Promise<boolean> {
    const { store } = this.#o;
    const { namespace, name } = a.trigger.metadata;
    for (let attempt = 1; ; attempt++) {
      const cur = await store.get('TimeTrigger', namespace, name);
      if (!cur || cur.metadata.uid !== a.uid || (cur.metadata.generation ?? 1) !== a.generation) return false;
      const status = make(cur.status);
      if (status === undefined) return false;
      try {
        const written = await store.updateStatus<TimeTrigger>({ ...cur, status });
        if (!a.stopped) a.trigger = written;
        return true;
      } catch (err) {
        if (!isFlintError(err) || err.code !== 'FLINT_ERR_CONFLICT' || attempt >= WRITE_ATTEMPTS) throw err;
      }
    }
  }

  /** One run for due time `due`: claim, call, record. */
  async #run(a: Armed, due: number, missed: boolean): Promise<void> {
    const { name } = a.trigger.metadata;
    const log = this.#o.logger.child({ trigger: a.key });
    const max = this.#o.maxInFlight ?? 10;
    if (a.inFlight >= max) {
      this.#note(a, `time trigger '${name}' skipped the run due ${rfc3339(due)}: ${a.inFlight} earlier runs are still under way`, log, 'warn');
      return;
    }
    let won: boolean;
    const previous = a.claiming;
    const claim = previous.then(() => this.#writeStatus(a, (s) => (unclaimed(s, due) ? claimed(s, due) : undefined)));
    a.claiming = claim.catch(() => {});
    try {
      won = await claim;
    } catch (err) {
      // Without a claim the run could happen twice; it is skipped instead.
      log.warn({ due: rfc3339(due), err: (err as Error).message }, 'time trigger run skipped: its claim could not be written');
      return;
    }
    if (!won) return;
    a.inFlight++;
    let outcome: RunOutcome;
    try {
      outcome = await this.#call(a.trigger, due);
    } finally {
      a.inFlight--;
    }
    const spec = a.trigger.spec;
    const what = `time trigger '${name}'${missed ? ' (a run missed while no scheduler ran)' : ''} due ${rfc3339(due)}: ${spec.method || 'POST'} ${spec.subpath || '/'}`;
    const result = outcome.error === undefined ? `${outcome.statusCode} in ${outcome.durationMs} ms` : `failed after ${outcome.durationMs} ms: ${outcome.error}`;
    this.#note(a, `${what} -> ${result}`, log, outcome.error === undefined ? 'info' : 'warn');
    const ok = outcome.error === undefined;
    try {
      await this.#writeStatus(a, (s) =>
        s?.lastFireTime === rfc3339(due)
          ? {
              ...s,
              lastOutcome: ok ? 'succeeded' : 'failed',
              lastStatusCode: outcome.statusCode,
              lastDurationMs: outcome.durationMs,
              lastError: outcome.error ?? '',
            }
          : // A later run claimed the status meanwhile: its outcome is the one shown.
            undefined,
      );
    } catch (err) {
      log.warn({ due: rfc3339(due), err: (err as Error).message }, "time trigger run's outcome could not be written");
    }
  }

  /** The line goes to the function's log when this process keeps one, else to the server's. */
  #note(a: Armed, line: string, log: Logger, level: 'info' | 'warn'): void {
    const fn = a.trigger.spec.functionref.name as string;
    const written = this.#o.functionLog?.(a.trigger.metadata.namespace, fn, line) ?? false;
    if (!written) log[level]({ function: fn }, line);
    else if (level === 'warn') log.warn({ function: fn }, line);
  }

  /** Calls the function once; never throws. */
  async #call(t: TimeTrigger, due: number): Promise<RunOutcome> {
    const origin = this.#o.routerUrl();
    const path = functionPath(t.metadata.namespace, t.spec.functionref.name as string, t.spec.subpath);
    const headers: Record<string, string> = {
      'x-flint-trigger-name': t.metadata.name,
      'x-flint-trigger-namespace': t.metadata.namespace,
      'x-flint-scheduled-time': rfc3339(due),
    };
    const token = this.#o.token?.();
    if (token) headers.authorization = `Bearer ${token}`;
    const started = performance.now();
    const took = () => Math.round(performance.now() - started);
    try {
      // No time limit of its own: the router ends a call at the function's functionTimeout.
      const res = await this.#http.request({
        origin,
        path,
        method: (t.spec.method || 'POST') as 'POST',
        headers,
        signal: this.#abort.signal,
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      const body = await res.body.text();
      const durationMs = took();
      if (res.statusCode >= 200 && res.statusCode < 300) return { statusCode: res.statusCode, durationMs };
      const excerpt = body.length > ERROR_BODY_CHARS ? `${body.slice(0, ERROR_BODY_CHARS)}...` : body;
      return { statusCode: res.statusCode, durationMs, error: `the function answered ${res.statusCode}${excerpt.trim() ? `: ${excerpt.trim()}` : ''}` };
    } catch (err) {
      const why = this.#abort.signal.aborted ? 'cut off: the scheduler stopped during the call' : `the router could not be reached: ${(err as Error).message}`;
      return { statusCode: 0, durationMs: took(), error: why };
    }
  }
}

export function createTimeTriggerScheduler(opts: TimeTriggerSchedulerOptions): TimeTriggerScheduler {
  return new TimeTriggerScheduler(opts);
}
