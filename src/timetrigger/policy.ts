// When a time trigger runs, decided from its stored status alone, so a
// restarted scheduler (or the replica that takes over the Lease) picks up
// where the last one left off:
//
// - A due time is owed one run when it is later than the trigger's anchor:
//   the due time last run (`status.lastFireTime`), or, before the first run,
//   the moment the scheduler began following this spec (`status.activeSince`;
//   the creation time for a new trigger).
// - At start, the latest due time that passed while nobody was scheduling
//   (the server was down) is run once, however many passed: a missed run is
//   made up once, never replayed.
// - A run is claimed by writing its due time to `status.lastFireTime` (with
//   the store's optimistic concurrency) before the function is called: a due
//   time already claimed is never run again. A crash between the claim and
//   the call loses that run (at most once, never twice).
import { rfc3339, type Schedule } from '../api/cron.ts';
import type { TimeTrigger, TimeTriggerStatus } from '../api/kinds.ts';

export function parseTime(text: string | undefined): number | undefined {
  if (text === undefined || text === '') return undefined;
  const t = Date.parse(text);
  return Number.isNaN(t) ? undefined : t;
}

export interface Start {
  /** Due times after this are owed a run. */
  anchor: number;
  /** The status to write first when the scheduler begins following a new generation of the spec. */
  activate?: TimeTriggerStatus;
}

/**
 * Where a trigger's schedule starts from. A generation the scheduler already
 * followed resumes after its last run; a new trigger counts from its creation
 * (so a run due while the server was down before the first one is not lost);
 * a changed spec counts from now, since runs missed under the old schedule are
 * not the new one's to make up.
 */
export function startOf(t: TimeTrigger, now: number): Start {
  const status = t.status ?? {};
  const generation = t.metadata.generation ?? 1;
  if (status.observedGeneration === generation) {
    const since = parseTime(status.activeSince) ?? parseTime(t.metadata.creationTimestamp) ?? now;
    const last = parseTime(status.lastFireTime);
    return { anchor: last !== undefined && last > since ? last : since };
  }
  const fresh = generation === 1 && status.observedGeneration === undefined && status.lastFireTime === undefined;
  const created = parseTime(t.metadata.creationTimestamp);
  const since = fresh && created !== undefined && created <= now ? created : now;
  return { anchor: since, activate: { ...status, observedGeneration: generation, activeSince: rfc3339(since) } };
}

/** The one run owed for the due times that passed after `anchor` up to `now`, if any: the latest of them. */
export function missedRun(schedule: Schedule, anchor: number, now: number): number | undefined {
  const latest = schedule.latest(now);
  return latest !== undefined && latest > anchor ? latest : undefined;
}

/** Whether `due` is still unclaimed in this status. */
export function unclaimed(status: TimeTriggerStatus | undefined, due: number): boolean {
  const last = parseTime(status?.lastFireTime);
  return last === undefined || last < due;
}

/** The status that claims `due`: the last run's outcome is cleared until this one's is known. */
export function claimed(status: TimeTriggerStatus | undefined, due: number): TimeTriggerStatus {
  const { lastStatusCode: _c, lastDurationMs: _d, lastError: _e, ...rest } = status ?? {};
  return { ...rest, lastFireTime: rfc3339(due), lastOutcome: 'running' };
}

/** The path a run calls through the router's internal function path; the function sees `subpath`. */
export function functionPath(namespace: string, name: string, subpath: string | undefined): string {
  const sub = subpath && subpath !== '/' ? (subpath.startsWith('/') ? subpath : `/${subpath}`) : '';
  // `/flint-function/<name>/<sub>` could mean function <sub> of namespace <name>: with a sub-path the namespace is always named.
  if (namespace === 'default' && sub === '') return `/flint-function/${name}`;
  return `/flint-function/${namespace}/${name}${sub}`;
}
