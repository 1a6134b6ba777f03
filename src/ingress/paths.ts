// Ingress path rules, shared by every provider so that the builtin gateway,
// the nginx config and the CLI agree on what a path means:
//   /hello        exact
//   /hello/*      /hello and everything below /hello/
//   (route prefix /api)   /api and everything below /api/, like the router
//   (route prefix /api/)  everything below /api/, like the router
// Paths may hold route-template parameters (`/users/{id}`); they match as the
// router's templates do.
import { type CompiledTemplate, compileTemplate, matchTemplate } from '../api/route-template.ts';

export interface PathRule {
  /** The path as written in the ingress (`/foo/*`, `/hello`). */
  source: string;
  kind: 'exact' | 'prefix';
  /**
   * Exact: the whole path. Prefix: the part every match starts with, with no
   * trailing '/' (`''` for `/*`, which matches everything).
   */
  base: string;
  /** Prefix only: whether `base` itself (no trailing '/') matches too. */
  bare: boolean;
  /** Present when the path has `{param}` groups. */
  template?: CompiledTemplate;
}

/** Why a path cannot be an ingress path, or undefined when it can. */
export function ingressPathProblem(path: string): string | undefined {
  if (path === '') return 'is empty';
  if (!path.startsWith('/')) return `must start with '/', got '${path}'`;
  if (/[\s\x00-\x1f\x7f]/.test(path)) return `must not hold spaces or control characters, got '${path}'`;
  // Template regexes may use '?' and '*'; only the literal parts are checked.
  const literal = withoutTemplateGroups(path);
  if (/[?#]/.test(literal)) return `must not hold '?' or '#', got '${path}'`;
  const star = literal.indexOf('*');
  if (star >= 0 && !(star === literal.length - 1 && literal.endsWith('/*'))) {
    return `'*' is allowed only as a final '/*' (everything below), got '${path}'`;
  }
  if (literal.split('/').includes('..')) return `must not hold a '..' segment, got '${path}'`;
  return undefined;
}

/** The path with every balanced `{...}` group replaced by `{}`. */
function withoutTemplateGroups(path: string): string {
  let out = '';
  let depth = 0;
  for (let i = 0; i < path.length; i++) {
    const c = path[i];
    if (depth > 0 && c === '\\') {
      i++;
      continue;
    }
    if (c === '{') {
      if (depth === 0) out += '{';
      depth++;
    } else if (c === '}' && depth > 0) {
      depth--;
      if (depth === 0) out += '}';
    } else if (depth === 0) out += c;
  }
  return out;
}

/**
 * Parses an ingress path. `routePrefix` says the path came from a route's
 * `prefix` (so it follows the router's prefix rules) rather than being written
 * as an ingress path. Throws Error on a malformed path or template.
 */
export function parsePathRule(path: string, opts: { routePrefix?: boolean } = {}): PathRule {
  const problem = ingressPathProblem(path);
  if (problem) throw new Error(`ingress path ${problem}`);
  let rule: PathRule;
  if (path.endsWith('/*')) {
    rule = { source: path, kind: 'prefix', base: path.slice(0, -2), bare: true };
  } else if (opts.routePrefix) {
    rule = path.endsWith('/')
      ? { source: path, kind: 'prefix', base: path.slice(0, -1), bare: false }
      : { source: path, kind: 'prefix', base: path, bare: true };
  } else {
    rule = { source: path, kind: 'exact', base: path, bare: false };
  }
  if (rule.base.includes('{')) {
    // Throws FlintError with the template problem: the caller reports it.
    rule.template = compileTemplate(rule.base, { prefix: rule.kind === 'prefix', field: 'ingress path' });
  }
  return rule;
}

export interface PathMatch {
  /** Length of the request path the rule consumed (prefix rules: the base). */
  matchedLength: number;
  params: Record<string, string>;
}

export function matchPath(rule: PathRule, path: string): PathMatch | undefined {
  if (rule.template) {
    const m = matchTemplate(rule.template, path);
    if (!m) return undefined;
    if (rule.kind === 'prefix') {
      const atBoundary = m.matchedLength === path.length ? rule.bare : path[m.matchedLength] === '/';
      if (!atBoundary) return undefined;
    }
    return { matchedLength: m.matchedLength, params: m.params };
  }
  if (rule.kind === 'exact') return path === rule.base ? { matchedLength: path.length, params: {} } : undefined;
  if ((rule.bare && path === rule.base) || path.startsWith(`${rule.base}/`)) return { matchedLength: rule.base.length, params: {} };
  return undefined;
}

/** Where a route lives at the router. */
export interface RouteTarget {
  /** The route's relativeurl, or its prefix. */
  path: string;
  prefix: boolean;
}

/**
 * How requests matching `rule` are rewritten for the router: `undefined`
 * when the path is forwarded unchanged (the ingress path is the route's own
 * path, or either side holds template parameters, which cannot be mapped
 * onto each other reliably).
 */
export function rewriteFor(rule: PathRule, target: RouteTarget): ((path: string, matchedLength: number) => string) | undefined {
  if (rule.template || target.path.includes('{')) return undefined;
  if (sameAsRoute(rule, target)) return undefined;
  if (!target.prefix) {
    const fixed = target.path;
    return () => fixed;
  }
  const targetBase = target.path.endsWith('/') ? target.path.slice(0, -1) : target.path;
  if (rule.kind === 'exact') {
    const fixed = target.path;
    return () => fixed;
  }
  return (path, matchedLength) => {
    const rest = path.slice(matchedLength);
    return rest === '' ? target.path : targetBase + rest;
  };
}

function sameAsRoute(rule: PathRule, target: RouteTarget): boolean {
  if (rule.source === target.path) return true;
  // `/api/*` over prefix `/api` matches exactly what the router matches.
  return target.prefix && rule.kind === 'prefix' && rule.bare && rule.base === target.path;
}

/** Orders rules the way both local providers try them: exact, then templates, then longest prefix. */
export function compareRules(a: PathRule, b: PathRule): number {
  return rank(a) - rank(b) || b.base.length - a.base.length;
}

function rank(r: PathRule): number {
  if (r.kind === 'exact' && !r.template) return 0;
  if (r.kind === 'exact') return 1;
  if (r.template) return 2;
  return 3;
}
