// A function as the router forwards to it: everything a request needs that
// depends only on the Function object is computed once per resourceVersion,
// not once per request.
import type { FunctionResource } from '../api/kinds.ts';

const DEFAULT_FUNCTION_TIMEOUT_S = 60;

export function functionKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** Whether a response with these headers is a stream of the given kind. */
export function isStream(kind: 'sse' | 'chunked' | 'any', headers: readonly string[]): boolean {
  let sse = false;
  let sized = false;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i];
    if (name.length === 12 && name.toLowerCase() === 'content-type') sse = headers[i + 1].trimStart().toLowerCase().startsWith('text/event-stream');
    else if (name.length === 14 && name.toLowerCase() === 'content-length') sized = true;
  }
  return kind === 'sse' ? sse : kind === 'chunked' ? !sized : sse || !sized;
}

export class FnTarget {
  readonly fn: FunctionResource;
  readonly key: string;
  readonly name: string;
  readonly namespace: string;
  /** The wait for a response head, and the longest silence inside a body unless `streaming` says otherwise. */
  readonly timeoutMs: number;
  /**
   * Which responses are streams that the function's streaming limits apply
   * to: `sse` (text/event-stream), `chunked` (no Content-Length), `any` of
   * those, or undefined for none.
   */
  readonly streamKind: 'sse' | 'chunked' | 'any' | undefined;
  /** A stream's longest silence inside its body, instead of timeoutMs; 0 for timeoutMs. */
  readonly streamIdleMs: number;
  /** Longest a stream's body may flow, from its head; 0 for no limit. */
  readonly streamMaxMs: number;
  /** WebSockets: longest silence both ways, and longest life; 0 for no limit. */
  readonly tunnelIdleMs: number;
  readonly tunnelMaxMs: number;
  /** Name/value pairs appended to every forwarded request. */
  readonly headers: readonly string[];
  /** Per-function metric handles, filled lazily by the metrics module. */
  stats: unknown;

  constructor(fn: FunctionResource) {
    const m = fn.metadata;
    this.fn = fn;
    this.name = m.name;
    this.namespace = m.namespace;
    this.key = functionKey(m.namespace, m.name);
    this.timeoutMs = (fn.spec.functionTimeout ?? DEFAULT_FUNCTION_TIMEOUT_S) * 1000;
    const streaming = fn.spec.streaming;
    const protocol = streaming?.protocol ?? 'auto';
    const ws = streaming !== undefined && (protocol === 'auto' || protocol === 'websocket');
    const idleMs = (streaming?.idleTimeoutSeconds ?? 0) * 1000;
    const maxMs = (streaming?.maxDurationSeconds ?? 0) * 1000;
    const limited = idleMs > 0 || maxMs > 0;
    this.streamKind = streaming === undefined || protocol === 'websocket' || !limited ? undefined : protocol === 'auto' ? 'any' : protocol;
    this.streamIdleMs = this.streamKind === undefined ? 0 : idleMs;
    this.streamMaxMs = this.streamKind === undefined ? 0 : maxMs;
    this.tunnelIdleMs = ws ? idleMs : 0;
    this.tunnelMaxMs = ws ? maxMs : 0;
    this.headers = [
      'X-Flint-Function-Name',
      m.name,
      'X-Flint-Function-Namespace',
      m.namespace,
      'X-Flint-Function-Uid',
      m.uid,
      'X-Flint-Function-ResourceVersion',
      m.resourceVersion,
    ];
    this.stats = undefined;
  }
}

/** Canary backends: one is drawn per request, in proportion to its weight. */
export class WeightedTargets {
  readonly targets: readonly FnTarget[];
  readonly #cumulative: number[];
  readonly #total: number;

  constructor(weighted: Array<[FnTarget, number]>) {
    this.targets = weighted.map(([t]) => t);
    this.#cumulative = [];
    let sum = 0;
    for (const [, w] of weighted) {
      sum += w;
      this.#cumulative.push(sum);
    }
    this.#total = sum;
  }

  get total(): number {
    return this.#total;
  }

  /** `r` in [0, 1): injectable so tests can pin the draw. */
  pick(r: number = Math.random()): FnTarget {
    const x = Math.floor(r * this.#total);
    const c = this.#cumulative;
    for (let i = 0; i < c.length; i++) if (x < c[i]) return this.targets[i];
    return this.targets[this.targets.length - 1];
  }
}

export type Backend = FnTarget | WeightedTargets;

export function pickTarget(b: Backend): FnTarget {
  return b instanceof FnTarget ? b : b.pick();
}
