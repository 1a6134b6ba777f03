// The route table: built from HTTPTriggers and Functions, matched per request.
// Precedence: host-qualified exact, host-qualified prefix, exact, prefix
// (longest first); ties go to the oldest trigger, then namespace/name.
// Literal exact paths sit in a map so the common case costs one lookup.
import type { FunctionResource, HTTPTrigger } from '../api/kinds.ts';
import { type CompiledTemplate, compileTemplate, matchTemplate } from '../api/route-template.ts';

export interface RouteEntry {
  trigger: HTTPTrigger;
  host: string;
  prefix: boolean;
  keepPrefix: boolean;
  template: CompiledTemplate;
  methods: Set<string>;
  allow: string;
  /** Candidates with weights; one entry for a plain function reference. */
  targets: Array<{ fn: FunctionResource; weight: number }>;
  totalWeight: number;
}

export interface RouteMatch {
  route: RouteEntry;
  fn: FunctionResource;
  params: Record<string, string>;
  /** The path the function sees. */
  forwardPath: string;
}

export type MatchResult = { kind: 'match'; match: RouteMatch } | { kind: 'method'; allow: string } | { kind: 'none' };

function methodsOf(t: HTTPTrigger): Set<string> {
  const s = new Set((t.spec.methods ?? []).map((m) => m.toUpperCase()));
  if (t.spec.method) s.add(t.spec.method.toUpperCase());
  if (s.size === 0) s.add('GET');
  return s;
}

function order(a: RouteEntry, b: RouteEntry): number {
  if (a.prefix && b.prefix && a.template.literalPrefix.length !== b.template.literalPrefix.length) {
    return b.template.literalPrefix.length - a.template.literalPrefix.length;
  }
  const ta = a.trigger.metadata.creationTimestamp;
  const tb = b.trigger.metadata.creationTimestamp;
  if (ta !== tb) return ta < tb ? -1 : 1;
  const ka = `${a.trigger.metadata.namespace}/${a.trigger.metadata.name}`;
  const kb = `${b.trigger.metadata.namespace}/${b.trigger.metadata.name}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

interface Tier {
  exactLiteral: Map<string, RouteEntry[]>;
  exactTemplated: RouteEntry[];
  prefixes: RouteEntry[];
}

function emptyTier(): Tier {
  return { exactLiteral: new Map(), exactTemplated: [], prefixes: [] };
}

export class RouteTable {
  readonly #hosted = new Map<string, Tier>();
  readonly #hostless = emptyTier();
  readonly size: number;

  constructor(triggers: HTTPTrigger[], functions: Map<string, FunctionResource>, onSkip?: (t: HTTPTrigger, why: string) => void) {
    let size = 0;
    for (const t of triggers) {
      const targets: RouteEntry['targets'] = [];
      const ref = t.spec.functionref;
      const names = (ref.type ?? 'name') === 'name' ? [[ref.name as string, 1] as const] : Object.entries(ref.functionweights ?? {});
      for (const [name, weight] of names) {
        const fn = functions.get(`${t.metadata.namespace}/${name}`);
        if (fn && weight > 0) targets.push({ fn, weight });
      }
      if (targets.length === 0) {
        onSkip?.(t, 'function not found');
        continue;
      }
      const usePrefix = t.spec.prefix !== undefined && t.spec.prefix !== '';
      let template: CompiledTemplate;
      try {
        template = compileTemplate((usePrefix ? t.spec.prefix : t.spec.relativeurl) as string, { prefix: usePrefix });
      } catch (err) {
        onSkip?.(t, (err as Error).message);
        continue;
      }
      const methods = methodsOf(t);
      const entry: RouteEntry = {
        trigger: t,
        host: t.spec.host ?? '',
        prefix: usePrefix,
        keepPrefix: t.spec.keepPrefix === true,
        template,
        methods,
        allow: [...methods].sort().join(', '),
        targets,
        totalWeight: targets.reduce((a, x) => a + x.weight, 0),
      };
      let tier = this.#hostless;
      if (entry.host) {
        tier = this.#hosted.get(entry.host) ?? emptyTier();
        this.#hosted.set(entry.host, tier);
      }
      if (!usePrefix && !template.hasParams) {
        const list = tier.exactLiteral.get(template.literalPrefix) ?? [];
        list.push(entry);
        tier.exactLiteral.set(template.literalPrefix, list);
      } else if (!usePrefix) tier.exactTemplated.push(entry);
      else tier.prefixes.push(entry);
      size++;
    }
    for (const tier of [this.#hostless, ...this.#hosted.values()]) {
      for (const list of tier.exactLiteral.values()) list.sort(order);
      tier.exactTemplated.sort(order);
      tier.prefixes.sort(order);
    }
    this.size = size;
  }

  match(method: string, host: string | undefined, path: string): MatchResult {
    let allow: string | undefined;
    const tiers = host !== undefined && this.#hosted.size > 0 ? [this.#hosted.get(host), this.#hostless] : [this.#hostless];
    for (const tier of tiers) {
      if (!tier) continue;
      // Exact routes before prefix routes, within a host tier.
      const literal = tier.exactLiteral.get(path);
      if (literal) {
        for (const r of literal) {
          if (r.methods.has(method)) return { kind: 'match', match: this.#result(r, {}, path, path.length) };
          allow ??= r.allow;
        }
      }
      for (const r of tier.exactTemplated) {
        const m = matchTemplate(r.template, path);
        if (!m) continue;
        if (r.methods.has(method)) return { kind: 'match', match: this.#result(r, m.params, path, m.matchedLength) };
        allow ??= r.allow;
      }
      for (const r of tier.prefixes) {
        const m = this.#matchPrefix(r, path);
        if (!m) continue;
        if (r.methods.has(method)) return { kind: 'match', match: this.#result(r, m.params, path, m.matchedLength) };
        allow ??= r.allow;
      }
    }
    return allow ? { kind: 'method', allow } : { kind: 'none' };
  }

  /** `/api` matches `/api` and `/api/...` but not `/apifoo`; `/api/` matches below it only. */
  #matchPrefix(r: RouteEntry, path: string): { params: Record<string, string>; matchedLength: number } | undefined {
    const m = matchTemplate(r.template, path);
    if (!m) return undefined;
    const src = r.template.source;
    if (src.endsWith('/')) return m;
    const next = path.charCodeAt(m.matchedLength);
    return Number.isNaN(next) || next === 47 /* '/' */ ? m : undefined;
  }

  #result(r: RouteEntry, params: Record<string, string>, path: string, matchedLength: number): RouteMatch {
    let fn = r.targets[0].fn;
    if (r.targets.length > 1) {
      let pick = Math.random() * r.totalWeight;
      for (const t of r.targets) {
        pick -= t.weight;
        if (pick < 0) {
          fn = t.fn;
          break;
        }
      }
    }
    let forwardPath = path;
    if (r.prefix && !r.keepPrefix) {
      const rest = path.slice(r.template.source.endsWith('/') ? matchedLength - 1 : matchedLength);
      forwardPath = rest.startsWith('/') ? rest : `/${rest}`;
    }
    return { route: r, fn, params, forwardPath };
  }
}
