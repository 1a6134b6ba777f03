// Time-trigger schedules: what `spec.cron` may say and when it is due.
// Cron expressions are read by croner (a maintained, dependency-free parser)
// in UTC: 5 fields (minute hour day-of-month month day-of-week), or 6 with
// seconds first, and the nicknames @yearly/@annually, @monthly, @weekly,
// @daily/@midnight and @hourly. Fission's `@every <duration>` (Go's duration
// syntax: 90s, 5m, 1h30m) is read here: it is due at every whole multiple of
// the duration since the Unix epoch, so the times are the same on every
// replica and after a restart, and need no memory of when counting began.
import { Cron } from 'croner';

export interface Schedule {
  readonly expression: string;
  /** The first due time strictly after `t` (ms since the epoch), or undefined when there is none. */
  next(t: number): number | undefined;
  /** The latest due time at or before `t`, or undefined when there is none. */
  latest(t: number): number | undefined;
}

const MS = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
/** A hundred years: past this an interval is a mistake, and the arithmetic stays exact. */
const MAX_EVERY_MS = 100 * 365 * 86_400_000;

/** Go's time.ParseDuration, as Fission's `@every` reads it; whole seconds of at least one. */
export function parseEvery(text: string): number {
  const s = text.trim();
  if (s === '') throw new Error("'@every' needs a duration, such as @every 1m or @every 1h30m");
  const part = /([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)/y;
  let ms = 0;
  let at = 0;
  while (at < s.length) {
    part.lastIndex = at;
    const m = part.exec(s);
    if (!m) throw new Error(`'${s}' is not a duration: use a number and a unit (h, m, s, ms), such as 90s, 5m or 1h30m`);
    ms += Number(m[1]) * MS[m[2] as keyof typeof MS];
    at = part.lastIndex;
  }
  if (ms < 1000) throw new Error(`@every ${s} is shorter than the shortest interval, 1s`);
  if (ms > MAX_EVERY_MS) throw new Error(`@every ${s} is longer than a hundred years`);
  if (!Number.isInteger(ms / 1000)) throw new Error(`@every ${s} is not a whole number of seconds`);
  return ms;
}

function every(expression: string, ms: number): Schedule {
  return {
    expression,
    next: (t) => (Math.floor(t / ms) + 1) * ms,
    latest: (t) => Math.floor(t / ms) * ms,
  };
}

const FIELD_HELP = '5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, @every <duration>, or one of @hourly, @daily, @weekly, @monthly, @yearly';

const RANGES: Record<string, string> = {
  second: 'second (0-59)',
  minute: 'minute (0-59)',
  hour: 'hour (0-23)',
  day: 'day of month (1-31)',
  month: 'month (1-12 or JAN-DEC)',
  dayOfWeek: 'day of week (0-7 or SUN-SAT)',
};

/** croner's message, in the words of the fields a user wrote. */
function reason(text: string, why: string): string {
  if (text.startsWith('@')) {
    if (/^@reboot$/i.test(text)) return '@reboot is not a schedule: a time trigger runs at due times';
    if (/invalid configuration format/.test(why)) return `unknown nickname '${text}': use ${FIELD_HELP}`;
  }
  // croner reports the value after its own offset (month 13 as 12): name the field and its range instead.
  const range = /^Invalid value for (\w+)/.exec(why);
  if (range && RANGES[range[1]]) return `a value is out of range for the ${RANGES[range[1]]}`;
  return why.charAt(0).toLowerCase() + why.slice(1);
}

/** Reads a schedule; throws an Error whose message says what is wrong with it. */
export function parseSchedule(expression: string): Schedule {
  const text = expression.trim();
  if (text === '') throw new Error(`a schedule is required: ${FIELD_HELP}`);
  const m = /^@every(?:\s+(.*))?$/i.exec(text);
  if (m) return every(expression, parseEvery(m[1] ?? ''));
  if (!text.startsWith('@')) {
    const fields = text.split(/\s+/).length;
    if (fields !== 5 && fields !== 6) throw new Error(`expected ${FIELD_HELP}; got ${fields} field${fields === 1 ? '' : 's'}`);
  }
  let cron: Cron;
  try {
    cron = new Cron(text, { timezone: 'UTC', mode: '5-or-6-parts', paused: true });
  } catch (err) {
    throw new Error(reason(text, ((err as Error).message ?? String(err)).replace(/^CronPattern:\s*/, '')));
  }
  if (cron.nextRun(new Date()) === null) throw new Error('the expression never matches a date');
  return {
    expression,
    next: (t) => cron.nextRun(new Date(t))?.getTime(),
    // croner's previous runs are strictly before the reference.
    latest: (t) => cron.previousRuns(1, new Date(t + 1))[0]?.getTime(),
  };
}

/** Why a schedule is refused, or undefined when it is good. */
export function scheduleProblem(expression: string): string | undefined {
  try {
    parseSchedule(expression);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The next `n` due times after `from`. */
export function nextDueTimes(schedule: Schedule, from: number, n: number): number[] {
  const out: number[] = [];
  let t = from;
  for (let i = 0; i < n; i++) {
    const next = schedule.next(t);
    if (next === undefined) break;
    out.push(next);
    t = next;
  }
  return out;
}

/** RFC 3339 in UTC, to the second when the time has no fraction (as Fission prints it). */
export function rfc3339(ms: number): string {
  const iso = new Date(ms).toISOString();
  return ms % 1000 === 0 ? iso.replace('.000Z', 'Z') : iso;
}
