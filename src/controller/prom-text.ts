// A reader for the Prometheus text exposition format, enough for the
// metrics Flint's own components write (counters, gauges, histograms with
// plain labels). Used to sample the routers' and the executor's counters for
// the dashboard, in process (local mode) or scraped (kubernetes mode).

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const unescapeLabel = (v: string) => v.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c));

/** The samples of the metrics whose names `keep` accepts; comments and malformed lines are skipped. */
export function parsePromText(text: string, keep: (name: string) => boolean = () => true): PromSample[] {
  const out: PromSample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m || !keep(m[1])) continue;
    const value = Number(m[3]);
    if (Number.isNaN(value)) continue;
    const labels: Record<string, string> = {};
    if (m[2] !== undefined) for (const l of m[2].matchAll(LABEL)) labels[l[1]] = unescapeLabel(l[2]);
    out.push({ name: m[1], labels, value });
  }
  return out;
}

/**
 * The q-quantile (0..1) of observations counted into cumulative buckets
 * (`le` upper bounds, ascending, the last +Inf), interpolated linearly inside
 * the bucket it falls in, as PromQL's histogram_quantile does. Undefined
 * when nothing was observed.
 */
export function histogramQuantile(q: number, buckets: ReadonlyArray<{ le: number; count: number }>): number | undefined {
  const total = buckets.length === 0 ? 0 : buckets[buckets.length - 1].count;
  if (total <= 0) return undefined;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      // Past the last finite bound: the best answer is that bound.
      if (!Number.isFinite(b.le)) return prevLe;
      const inBucket = b.count - prevCount;
      return inBucket <= 0 ? b.le : prevLe + (b.le - prevLe) * ((rank - prevCount) / inBucket);
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}
