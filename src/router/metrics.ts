// The router's Prometheus metrics, on a registry of its own. The hot path
// only bumps plain numbers kept per function; prom-client reads them when
// /metrics is scraped (its `collect` hooks, and a histogram of our own that
// speaks prom-client's metric protocol), because prom-client's own observe()
// hashes the label set on every call.
import { Counter, Gauge, Registry } from 'prom-client';
import type { FnTarget } from './targets.ts';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

interface Labels {
  function: string;
  namespace: string;
}

/** Counts for one function (or for requests that reached none). */
export class FnStats {
  readonly labels: Labels;
  /** `METHOD status` -> count. */
  readonly requests = new Map<string, number>();
  coldStarts = 0;
  /** Latency observations per bucket (not cumulative); the last one is +Inf. */
  readonly buckets = new Float64Array(BUCKETS.length + 1);
  latencySum = 0;
  latencyCount = 0;

  constructor(name: string, namespace: string) {
    this.labels = { function: name, namespace };
  }

  observe(seconds: number): void {
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]) i++;
    this.buckets[i]++;
    this.latencySum += seconds;
    this.latencyCount++;
  }
}

interface MetricValue {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/** A histogram in the shape prom-client's Registry reads (name, help, type, get, reset). */
class LatencyHistogram {
  readonly name = 'flint_router_request_duration_seconds';
  readonly help = 'Time from a request reaching the router to the end of its response, by function';
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #stats: () => Iterable<FnStats>;

  constructor(stats: () => Iterable<FnStats>) {
    this.#stats = stats;
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: MetricValue[] }> {
    const values: MetricValue[] = [];
    for (const s of this.#stats()) {
      if (s.latencyCount === 0) continue;
      let acc = 0;
      for (let i = 0; i <= BUCKETS.length; i++) {
        acc += s.buckets[i];
        values.push({ metricName: `${this.name}_bucket`, labels: { le: i < BUCKETS.length ? BUCKETS[i] : '+Inf', ...s.labels }, value: acc });
      }
      values.push({ metricName: `${this.name}_sum`, labels: { ...s.labels }, value: s.latencySum });
      values.push({ metricName: `${this.name}_count`, labels: { ...s.labels }, value: s.latencyCount });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const s of this.#stats()) {
      s.buckets.fill(0);
      s.latencySum = 0;
      s.latencyCount = 0;
    }
  }
}

export class RouterMetrics {
  readonly registry: Registry;
  readonly #byFunction = new Map<string, FnStats>();
  /** Requests no function answered: 404, 405, router-owned paths. */
  readonly none = new FnStats('', '');
  #inFlight = 0;
  /** count()'s last key, and what it was made of. */
  #lastMethod = '';
  #lastStatus = 0;
  #lastKey = '';

  /** `openUpgrades`: connections switched to another protocol (WebSockets) and open now. */
  constructor(registry: Registry = new Registry(), openUpgrades: () => number = () => 0) {
    this.registry = registry;
    const self = this;
    new Counter({
      name: 'flint_router_requests_total',
      help: 'Requests the router answered, by status code, method and function',
      labelNames: ['code', 'method', 'function', 'namespace'],
      registers: [registry],
      collect() {
        this.reset();
        for (const s of self.#all()) {
          for (const [k, n] of s.requests) {
            const sp = k.indexOf(' ');
            this.inc({ code: k.slice(sp + 1), method: k.slice(0, sp), ...s.labels }, n);
          }
        }
      },
    });
    new Counter({
      name: 'flint_router_cold_starts_total',
      help: 'Requests that waited for an instance to be specialized',
      labelNames: ['function', 'namespace'],
      registers: [registry],
      collect() {
        this.reset();
        for (const s of self.#byFunction.values()) if (s.coldStarts > 0) this.inc(s.labels, s.coldStarts);
      },
    });
    new Gauge({
      name: 'flint_router_in_flight_requests',
      help: 'Requests being proxied to a function right now',
      registers: [registry],
      collect() {
        this.set(self.#inFlight);
      },
    });
    new Gauge({
      name: 'flint_router_upgraded_connections',
      help: 'Connections switched to another protocol (WebSockets) that are open now; each holds its instance',
      registers: [registry],
      collect() {
        this.set(openUpgrades());
      },
    });
    registry.registerMetric(new LatencyHistogram(() => this.#byFunction.values()) as any);
  }

  *#all(): Iterable<FnStats> {
    yield this.none;
    yield* this.#byFunction.values();
  }

  /** Cached on the target; kept by function key so counts survive function updates. */
  statsFor(t: FnTarget): FnStats {
    let s = t.stats as FnStats | undefined;
    if (s !== undefined) return s;
    s = this.#byFunction.get(t.key);
    if (s === undefined) {
      s = new FnStats(t.name, t.namespace);
      this.#byFunction.set(t.key, s);
    }
    t.stats = s;
    return s;
  }

  begin(): void {
    this.#inFlight++;
  }

  /** Pairs with begin(). `startedMs` from performance.now(). */
  end(s: FnStats, method: string, status: number, startedMs: number): void {
    this.#inFlight--;
    this.count(s, method, status);
    s.observe((performance.now() - startedMs) / 1000);
  }

  /**
   * Requests per function key (`<namespace>/<name>`) since this router
   * started, and how many of them were answered 5xx (by the function, or by
   * the router on its behalf: timeout, unreachable): the figures
   * `flint_router_requests_total` exposes, summed over methods and codes.
   */
  functionCounts(): Map<string, { requests: number; failures: number }> {
    const out = new Map<string, { requests: number; failures: number }>();
    for (const [key, s] of this.#byFunction) {
      let requests = 0;
      let failures = 0;
      for (const [k, n] of s.requests) {
        requests += n;
        // `METHOD status`: the status's first digit follows the space.
        if (k.charCodeAt(k.indexOf(' ') + 1) === 53 /* 5 */) failures += n;
      }
      out.set(key, { requests, failures });
    }
    return out;
  }

  count(s: FnStats, method: string, status: number): void {
    // Most requests repeat the last method and status: their key string (and its hash) is made once.
    if (method !== this.#lastMethod || status !== this.#lastStatus) {
      this.#lastMethod = method;
      this.#lastStatus = status;
      this.#lastKey = `${method} ${status}`;
    }
    const k = this.#lastKey;
    s.requests.set(k, (s.requests.get(k) ?? 0) + 1);
  }
}
