// Samples the routers' request counters and latency histograms (and the
// executor's instance gauges where this process has them) every few
// seconds into a ring per function: the last ten minutes of requests per
// second, p50/p99 latency, 5xx answers and cold starts, for the dashboard's
// charts. Each source (a router) counts since it started, so a sample is the
// difference between two reads; a source whose counts went down restarted,
// and everything it counted is new.
import type { FunctionMetricsSource, MetricsSample } from '../api/function-metrics.ts';
import { histogramQuantile, parsePromText } from './prom-text.ts';

export interface MetricsText {
  /** Stable per router (its URL, or "local"), so differences are taken per router. */
  source: string;
  text: string;
}

export interface SamplerOptions {
  /** The Prometheus text of every source at this moment; a source that does not answer is left out. */
  read(): Promise<MetricsText[]>;
  intervalMs?: number;
  /** How many samples a function keeps (default: ten minutes' worth). */
  keep?: number;
  /** Most functions followed at once, so the rings stay bounded whatever the routers report. */
  maxFunctions?: number;
  onError?: (err: unknown) => void;
}

const REQUESTS = 'flint_router_requests_total';
const COLD = 'flint_router_cold_starts_total';
const BUCKET = 'flint_router_request_duration_seconds_bucket';
const INSTANCES = 'flint_executor_instances';
const WARM = 'flint_executor_warm_workers';
const WANTED = new Set([REQUESTS, COLD, BUCKET, INSTANCES]);

/** One function's cumulative figures in one source. */
interface Totals {
  requests: number;
  errors: number;
  coldStarts: number;
  /** Cumulative bucket counts by upper bound. */
  buckets: Map<number, number>;
  instances: number | undefined;
}

const emptyTotals = (): Totals => ({ requests: 0, errors: 0, coldStarts: 0, buckets: new Map(), instances: undefined });

export function totalsByFunction(text: string): Map<string, Totals> {
  const out = new Map<string, Totals>();
  for (const s of parsePromText(text, (n) => WANTED.has(n))) {
    if (!s.labels.function) continue;
    const key = `${s.labels.namespace ?? 'default'}/${s.labels.function}`;
    const t = out.get(key) ?? emptyTotals();
    out.set(key, t);
    if (s.name === REQUESTS) {
      t.requests += s.value;
      if (s.labels.code?.startsWith('5')) t.errors += s.value;
    } else if (s.name === COLD) t.coldStarts += s.value;
    else if (s.name === BUCKET) {
      const le = s.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(s.labels.le);
      if (!Number.isNaN(le)) t.buckets.set(le, (t.buckets.get(le) ?? 0) + s.value);
    } else if (s.name === INSTANCES && s.labels.state === 'running') t.instances = (t.instances ?? 0) + s.value;
  }
  return out;
}

/** What happened between two reads of one source; a counter that went down means the source restarted. */
function difference(cur: Totals, prev: Totals | undefined): Totals {
  if (!prev || cur.requests < prev.requests || cur.coldStarts < prev.coldStarts) return cur;
  const buckets = new Map<number, number>();
  for (const [le, n] of cur.buckets) buckets.set(le, Math.max(0, n - (prev.buckets.get(le) ?? 0)));
  return { requests: cur.requests - prev.requests, errors: Math.max(0, cur.errors - prev.errors), coldStarts: cur.coldStarts - prev.coldStarts, buckets, instances: cur.instances };
}

function add(into: Totals, d: Totals): void {
  into.requests += d.requests;
  into.errors += d.errors;
  into.coldStarts += d.coldStarts;
  for (const [le, n] of d.buckets) into.buckets.set(le, (into.buckets.get(le) ?? 0) + n);
  if (d.instances !== undefined) into.instances = (into.instances ?? 0) + d.instances;
}

const round = (v: number, digits: number) => Math.round(v * 10 ** digits) / 10 ** digits;

export class MetricsSampler implements FunctionMetricsSource {
  readonly intervalSeconds: number;
  readonly #o: SamplerOptions;
  readonly #keep: number;
  readonly #maxFunctions: number;
  readonly #rings = new Map<string, MetricsSample[]>();
  readonly #listeners = new Map<string, Set<(s: MetricsSample) => void>>();
  #last = new Map<string, Map<string, Totals>>();
  #lastAt = 0;
  /** Idle warm workers per environment key `<namespace>/<name>`, from the last read. */
  #warm = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  constructor(o: SamplerOptions) {
    this.#o = o;
    this.intervalSeconds = (o.intervalMs ?? 2000) / 1000;
    this.#keep = o.keep ?? Math.ceil(600 / this.intervalSeconds);
    this.#maxFunctions = o.maxFunctions ?? 2000;
  }

  start(): void {
    if (this.#timer) return;
    void this.tick();
    this.#timer = setInterval(() => void this.tick(), this.intervalSeconds * 1000);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  history(namespace: string, name: string): MetricsSample[] {
    return [...(this.#rings.get(`${namespace}/${name}`) ?? [])];
  }

  /** The environment's idle warm workers at the last read; undefined where no executor here reports them. */
  warmPool(namespace: string, environment: string): number | undefined {
    return this.#warm.get(`${namespace}/${environment}`);
  }

  subscribe(namespace: string, name: string, fn: (s: MetricsSample) => void): () => void {
    const key = `${namespace}/${name}`;
    const set = this.#listeners.get(key) ?? new Set();
    this.#listeners.set(key, set);
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0) this.#listeners.delete(key);
    };
  }

  /** One read of every source; the first only sets the baseline. Exposed for tests. */
  async tick(now = Date.now()): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const texts = await this.#o.read();
      const next = new Map<string, Map<string, Totals>>();
      const sums = new Map<string, Totals>();
      const warm = new Map<string, number>();
      for (const { source, text } of texts) {
        for (const w of parsePromText(text, (n) => n === WARM)) if (w.labels.environment) warm.set(w.labels.environment, w.value);
        const totals = totalsByFunction(text);
        next.set(source, totals);
        const prev = this.#last.get(source);
        // A source seen for the first time only sets its baseline, but its gauges count now.
        for (const [key, cur] of totals) {
          const sum = sums.get(key) ?? emptyTotals();
          sums.set(key, sum);
          add(sum, prev ? difference(cur, prev.get(key)) : { ...emptyTotals(), instances: cur.instances });
        }
      }
      const seconds = this.#lastAt === 0 ? 0 : (now - this.#lastAt) / 1000;
      this.#last = next;
      this.#lastAt = now;
      this.#warm = warm;
      if (seconds <= 0) return;
      // Followed functions get a sample every interval, quiet or not, so a chart's time axis moves.
      const keys = new Set([...this.#rings.keys(), ...sums.keys(), ...this.#listeners.keys()]);
      for (const key of keys) this.#record(key, sums.get(key) ?? emptyTotals(), seconds, now);
    } catch (err) {
      this.#o.onError?.(err);
    } finally {
      this.#busy = false;
    }
  }

  #record(key: string, d: Totals, seconds: number, now: number): void {
    const ring = this.#rings.get(key) ?? [];
    if (ring.length === 0 && !this.#rings.has(key)) {
      if (this.#rings.size >= this.#maxFunctions) return;
      this.#rings.set(key, ring);
    }
    const buckets = [...d.buckets].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
    const p50 = histogramQuantile(0.5, buckets);
    const p99 = histogramQuantile(0.99, buckets);
    const sample: MetricsSample = {
      t: now,
      rps: round(d.requests / seconds, 3),
      p50: p50 === undefined ? null : round(p50, 6),
      p99: p99 === undefined ? null : round(p99, 6),
      errors: d.errors,
      coldStarts: d.coldStarts,
      instances: d.instances ?? null,
    };
    ring.push(sample);
    if (ring.length > this.#keep) ring.splice(0, ring.length - this.#keep);
    for (const fn of this.#listeners.get(key) ?? []) fn(sample);
  }
}
