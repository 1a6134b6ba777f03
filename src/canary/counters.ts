// Where a canary's failure rate comes from: the routers' own counters of
// requests and 5xx answers per function (the figures behind
// `flint_router_requests_total`). Each router counts what it answered since
// it started, so the controller reads cumulative counts per router (a
// "source") and takes differences between two reads itself.
//
// - Local mode (and any process that runs the router beside the
//   controller): one source, the router's counters read in process.
// - Kubernetes mode with the controller elsewhere (role executor): every
//   router's /metrics, scraped at each read and summed. A router that
//   restarted (its counts went down) counts from zero; one seen for the first
//   time only sets its baseline; one that does not answer is left out of
//   that interval.
import { scrapeRouterMetrics } from './router-endpoints.ts';
import type { Counts } from './stepping.ts';

export type { Counts } from './stepping.ts';

/** One router's counts since it started, by function key `<namespace>/<name>`. */
export interface CounterSample {
  source: string;
  counts: ReadonlyMap<string, Counts>;
}

/** What the canary controller reads the routers' counters through. */
export interface RequestCounters {
  read(): Promise<CounterSample[]>;
}

/** The counters of the router in this process. */
export function localCounters(read: () => ReadonlyMap<string, Counts>): RequestCounters {
  return { read: async () => [{ source: 'local', counts: read() }] };
}

export const ROUTER_REQUESTS_METRIC = 'flint_router_requests_total';

const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const unescapeLabel = (v: string) => v.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c));

/** Requests and 5xx answers per function from a router's /metrics text (Prometheus exposition format). */
export function parseRouterMetrics(text: string): Map<string, Counts> {
  const out = new Map<string, Counts>();
  const head = `${ROUTER_REQUESTS_METRIC}{`;
  for (const line of text.split('\n')) {
    if (!line.startsWith(head)) continue;
    const close = line.lastIndexOf('}');
    if (close < 0) continue;
    const labels: Record<string, string> = {};
    for (const m of line.slice(head.length, close).matchAll(LABEL)) labels[m[1]] = unescapeLabel(m[2]);
    const value = Number(line.slice(close + 1).trim().split(' ')[0]);
    if (!labels.function || !Number.isFinite(value)) continue;
    const key = `${labels.namespace}/${labels.function}`;
    const c = out.get(key) ?? { requests: 0, failures: 0 };
    c.requests += value;
    if (labels.code?.startsWith('5')) c.failures += value;
    out.set(key, c);
  }
  return out;
}

export interface ScrapedCountersOptions {
  /** The routers' base URLs (`http://10.0.0.7:8080`), asked at every read. */
  routers(): Promise<string[]>;
  /** A bearer token for the routers when authentication is on. */
  token?: () => string | undefined;
  timeoutMs?: number;
  onError?: (url: string, err: unknown) => void;
}

/** Every router's /metrics: one source per router. */
export function scrapedCounters(o: ScrapedCountersOptions): RequestCounters {
  return {
    async read() {
      const texts = await scrapeRouterMetrics(await o.routers(), o);
      return texts.map(({ source, text }) => ({ source, counts: parseRouterMetrics(text) }));
    },
  };
}

/** One function's counts between two reads, across sources. */
export class CountWindow {
  readonly #key: string;
  #last: Map<string, Counts> | undefined;

  constructor(functionKey: string) {
    this.#key = functionKey;
  }

  /** The counts since the previous call; the first call only sets the baseline (and returns zeros). */
  advance(samples: CounterSample[]): Counts {
    const first = this.#last === undefined;
    const last = this.#last ?? new Map<string, Counts>();
    const next = new Map<string, Counts>();
    const sum: Counts = { requests: 0, failures: 0 };
    for (const s of samples) {
      const cur = s.counts.get(this.#key) ?? { requests: 0, failures: 0 };
      next.set(s.source, cur);
      const prev = last.get(s.source);
      if (first || prev === undefined) continue;
      // Fewer than before: that router restarted, and everything it counted is new.
      const reset = cur.requests < prev.requests || cur.failures < prev.failures;
      sum.requests += reset ? cur.requests : cur.requests - prev.requests;
      sum.failures += reset ? cur.failures : cur.failures - prev.failures;
    }
    // A source missing from this read keeps its last counts for the next one.
    for (const [source, c] of last) if (!next.has(source)) next.set(source, c);
    this.#last = next;
    return sum;
  }
}
