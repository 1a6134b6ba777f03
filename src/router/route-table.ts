// The route table: HTTPTriggers compiled into ordered entries, matched per
// request. A table is immutable once built; the route source swaps in a new
// one on every change, so a request never sees half an update.
//
// Order (first match wins, methods filter rather than rank):
//   1. routes with a host, exact    2. routes with a host, prefix
//   3. routes without host, exact   4. routes without host, prefix
// prefixes longest first; ties: oldest creationTimestamp, then namespace/name.
import type { HTTPTrigger } from '../api/kinds.ts';
import { type CompiledTemplate, compileTemplate, matchTemplate } from '../api/route-template.ts';
import { allowOf, maskOf, methodBit, triggerMethods } from './methods.ts';
import { type Backend, type FnTarget, functionKey, WeightedTargets } from './targets.ts';

/** What path the function sees. */
export const FORWARD_ORIGINAL = 0;
/** The prefix itself was requested and is stripped: the function sees `/`. */
export const FORWARD_ROOT = 1;
/** The path below the prefix. */
export const FORWARD_BELOW = 2;
export type ForwardMode = typeof FORWARD_ORIGINAL | typeof FORWARD_ROOT | typeof FORWARD_BELOW;

/** The function-independent part of one route, compiled once per trigger version. */
interface Shape {
  prefix: boolean;
  template: CompiledTemplate;
  forward: ForwardMode;
  /** `X-Flint-Params-<Name>` per template parameter, same order. */
  paramHeaders: string[];
}

export interface CompiledTrigger {
  id: string;
  namespace: string;
  created: string;
  /** Lower-cased; undefined matches any host. */
  host: string | undefined;
  methodMask: number;
  shapes: Shape[];
}

export interface RouteEntry {
  readonly trigger: string;
  readonly host: string | undefined;
  readonly prefix: boolean;
  readonly template: CompiledTemplate;
  readonly literal: boolean;
  readonly forward: ForwardMode;
  readonly paramHeaders: readonly string[];
  readonly methodMask: number;
  readonly backend: Backend;
  /** Position in precedence order, across the whole table. */
  order: number;
}

export interface RouteHit {
  entry: RouteEntry;
  /** Template parameters by name; undefined for parameterless paths. */
  params: Record<string, string> | undefined;
  /** Length of the matched path prefix (prefix routes). */
  matched: number;
}

/** A header name as Go canonicalizes it (`userId` -> `Userid`), so Fission functions keep working. */
export function paramHeaderName(param: string): string {
  let out = 'X-Flint-Params-';
  let upper = true;
  for (const c of param) {
    out += upper ? c.toUpperCase() : c.toLowerCase();
    upper = c === '-';
  }
  return out;
}

/** Compiles a trigger's paths; throws a FlintError for a malformed template. */
export function compileTrigger(ht: HTTPTrigger): CompiledTrigger {
  const s = ht.spec;
  const m = ht.metadata;
  const shapes: Shape[] = [];
  const add = (template: CompiledTemplate, prefix: boolean, forward: ForwardMode) =>
    shapes.push({ prefix, template, forward, paramHeaders: template.params.map(paramHeaderName) });
  if (s.prefix !== undefined && s.prefix !== '') {
    const keep = s.keepPrefix === true;
    const p = s.prefix;
    if (p.endsWith('/')) {
      // `/api/` is a subtree only: `/api` itself does not match.
      add(compileTemplate(p, { prefix: true, field: 'spec.prefix' }), true, keep ? FORWARD_ORIGINAL : FORWARD_BELOW);
    } else {
      // `/api` is `/api` exactly plus the `/api/` subtree, so `/apifoo` stays out.
      add(compileTemplate(p, { prefix: false, field: 'spec.prefix' }), false, keep ? FORWARD_ORIGINAL : FORWARD_ROOT);
      add(compileTemplate(`${p}/`, { prefix: true, field: 'spec.prefix' }), true, keep ? FORWARD_ORIGINAL : FORWARD_BELOW);
    }
  } else {
    add(compileTemplate(s.relativeurl ?? '', { prefix: false, field: 'spec.relativeurl' }), false, FORWARD_ORIGINAL);
  }
  return {
    id: functionKey(m.namespace, m.name),
    namespace: m.namespace,
    created: m.creationTimestamp ?? '',
    host: s.host ? s.host.toLowerCase() : undefined,
    methodMask: maskOf(triggerMethods(s)),
    shapes,
  };
}

/** The functions a trigger names; undefined when it names none it can use. */
export function resolveBackend(ht: HTTPTrigger, fns: ReadonlyMap<string, FnTarget>): Backend | undefined {
  const ref = ht.spec.functionref;
  const ns = ht.metadata.namespace;
  if ((ref.type ?? 'name') === 'name') return ref.name ? fns.get(functionKey(ns, ref.name)) : undefined;
  const weighted: Array<[FnTarget, number]> = [];
  for (const [name, w] of Object.entries(ref.functionweights ?? {})) {
    const t = fns.get(functionKey(ns, name));
    // Sending a share of the traffic to a missing function would fail it at
    // random; the trigger waits until every function it names exists.
    if (!t) return undefined;
    if (w > 0) weighted.push([t, w]);
  }
  if (weighted.length === 0) return undefined;
  return weighted.length === 1 ? weighted[0][0] : new WeightedTargets(weighted);
}

/** Routes of one host class, in precedence order. */
class Lane {
  /** Parameterless exact routes by path: one map lookup instead of a scan. */
  readonly #literal = new Map<string, RouteEntry[]>();
  /** Everything else, in order. */
  readonly #scan: RouteEntry[] = [];
  readonly all: RouteEntry[];

  constructor(entries: RouteEntry[]) {
    this.all = entries;
    for (const e of entries) {
      if (e.literal && !e.prefix) {
        const list = this.#literal.get(e.template.literalPrefix);
        if (list) list.push(e);
        else this.#literal.set(e.template.literalPrefix, [e]);
      } else {
        this.#scan.push(e);
      }
    }
  }

  find(path: string, bit: number): RouteHit | undefined {
    let best: RouteEntry | undefined;
    const lits = this.#literal.get(path);
    if (lits !== undefined) {
      for (const e of lits) {
        if ((e.methodMask & bit) !== 0) {
          best = e;
          break;
        }
      }
    }
    const scan = this.#scan;
    for (let i = 0; i < scan.length; i++) {
      const e = scan[i];
      // Nothing after a literal hit can outrank it.
      if (best !== undefined && e.order > best.order) break;
      if ((e.methodMask & bit) === 0) continue;
      const hit = matchEntry(e, path);
      if (hit !== undefined) return hit;
    }
    return best === undefined ? undefined : { entry: best, params: undefined, matched: path.length };
  }

  /** Methods of every route whose path matches: the slow path behind a 405. */
  allowedMask(path: string): number {
    let mask = 0;
    for (const e of this.all) if (matchEntry(e, path) !== undefined) mask |= e.methodMask;
    return mask;
  }
}

function matchEntry(e: RouteEntry, path: string): RouteHit | undefined {
  const t = e.template;
  if (e.literal) {
    if (e.prefix ? path.startsWith(t.literalPrefix) : path === t.literalPrefix) {
      return { entry: e, params: undefined, matched: t.literalPrefix.length };
    }
    return undefined;
  }
  // Cheap literal check first: most paths fail here without running a regex.
  if (!path.startsWith(t.literalPrefix)) return undefined;
  const m = matchTemplate(t, path);
  return m === undefined ? undefined : { entry: e, params: m.params, matched: m.matchedLength };
}

export type MatchResult = RouteHit | { allow: string } | undefined;

export class RouteTable {
  readonly #byHost: Map<string, Lane>;
  /** Whether any host route is a wildcard (`*.example.com`): most tables have none. */
  readonly #wildcards: boolean;
  readonly #anyHost: Lane;
  /** Every function by `namespace/name`: the internal function path. */
  readonly functions: ReadonlyMap<string, FnTarget>;
  readonly size: number;

  constructor(entries: RouteEntry[], functions: ReadonlyMap<string, FnTarget>) {
    const hosts = new Map<string, RouteEntry[]>();
    const any: RouteEntry[] = [];
    for (const e of entries) {
      if (e.host === undefined) any.push(e);
      else {
        const list = hosts.get(e.host);
        if (list) list.push(e);
        else hosts.set(e.host, [e]);
      }
    }
    this.#byHost = new Map([...hosts].map(([h, list]) => [h, new Lane(list)]));
    this.#wildcards = [...hosts.keys()].some((h) => h.startsWith('*.'));
    this.#anyHost = new Lane(any);
    this.functions = functions;
    this.size = entries.length;
  }

  static readonly empty = new RouteTable([], new Map());

  /** `host` as the client sent it (lower-cased here only when a host route exists). */
  match(host: string, path: string, method: string): MatchResult {
    const bit = methodBit(method);
    let lane: Lane | undefined;
    let wild: Lane | undefined;
    if (this.#byHost.size > 0 && host !== '') {
      lane = this.#byHost.get(host) ?? this.#byHost.get(host.toLowerCase());
      const hit = lane?.find(path, bit);
      if (hit !== undefined) return hit;
      // `*.example.com` stands for one more label, as in an Ingress rule.
      const dot = this.#wildcards ? host.indexOf('.') : -1;
      wild = dot > 0 ? this.#byHost.get(`*${host.slice(dot).toLowerCase()}`) : undefined;
      const wildHit = wild?.find(path, bit);
      if (wildHit !== undefined) return wildHit;
    }
    const hit = this.#anyHost.find(path, bit);
    if (hit !== undefined) return hit;
    const mask = (lane?.allowedMask(path) ?? 0) | (wild?.allowedMask(path) ?? 0) | this.#anyHost.allowedMask(path);
    return mask === 0 ? undefined : { allow: allowOf(mask) };
  }
}

function compareEntries(a: { e: RouteEntry; created: string; id: string }, b: { e: RouteEntry; created: string; id: string }): number {
  const ha = a.e.host === undefined ? 1 : 0;
  const hb = b.e.host === undefined ? 1 : 0;
  if (ha !== hb) return ha - hb;
  if (a.e.prefix !== b.e.prefix) return a.e.prefix ? 1 : -1;
  if (a.e.prefix) {
    const d = b.e.template.source.length - a.e.template.source.length;
    if (d !== 0) return d;
  }
  if (a.created !== b.created) return a.created < b.created ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** Builds a table from compiled triggers and their resolved backends. */
export function buildTable(routes: Array<{ compiled: CompiledTrigger; backend: Backend }>, functions: ReadonlyMap<string, FnTarget>): RouteTable {
  const keyed: Array<{ e: RouteEntry; created: string; id: string }> = [];
  for (const { compiled: c, backend } of routes) {
    for (const s of c.shapes) {
      const e: RouteEntry = {
        trigger: c.id,
        host: c.host,
        prefix: s.prefix,
        template: s.template,
        literal: !s.template.hasParams,
        forward: s.forward,
        paramHeaders: s.paramHeaders,
        methodMask: c.methodMask,
        backend,
        order: 0,
      };
      keyed.push({ e, created: c.created, id: c.id });
    }
  }
  keyed.sort(compareEntries);
  const entries = keyed.map((k, i) => {
    k.e.order = i;
    return k.e;
  });
  return new RouteTable(entries, functions);
}
