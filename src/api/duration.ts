// Go's time.ParseDuration grammar (`90s`, `2m`, `1h30m`, `1.5h`, `500ms`),
// which Fission's canary interval is written in. Free of the schema library:
// the CLI checks its flag with it before asking the control plane.

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PART = /([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)/y;

/** Milliseconds, or undefined when `text` is not a duration (no sign, no bare number except `0`). */
export function parseDuration(text: string): number | undefined {
  if (text === '0') return 0;
  if (text === '' || text.length > 64) return undefined;
  let ms = 0;
  let at = 0;
  while (at < text.length) {
    PART.lastIndex = at;
    const m = PART.exec(text);
    if (!m || m[1] === '' || m[1] === '.') return undefined;
    ms += Number(m[1]) * UNIT_MS[m[2]];
    at = PART.lastIndex;
  }
  return ms;
}

/** A canary's interval: long enough for a window of traffic to mean something, short enough for one timer. */
export const CANARY_INTERVAL_MIN_MS = 1000;
export const CANARY_INTERVAL_MAX_MS = 720 * 3_600_000;

/** Why `text` is no canary interval, or undefined when it is one. */
export function canaryIntervalProblem(text: string): string | undefined {
  const ms = parseDuration(text);
  if (ms === undefined) return `'${text}' is not a duration: use a number and a unit, as in 30s, 2m, 1h30m (units ns, us, ms, s, m, h)`;
  if (ms < CANARY_INTERVAL_MIN_MS) return `'${text}' is shorter than the shortest interval, 1s`;
  if (ms > CANARY_INTERVAL_MAX_MS) return `'${text}' is longer than the longest interval, 720h`;
  return undefined;
}
