// A router token's scope: which functions it may call, and with which
// methods. Parsed once when the token is verified and kept with it in the
// verified-token cache, so the router's check per request is a Set lookup.

/** The claim a scoped token carries. `f`: function keys `<namespace>/<name>`; `m`: methods. Either may be absent (any). */
export const SCOPE_CLAIM = 'flint_scope';

export interface ScopeClaim {
  f?: string[];
  m?: string[];
}

/** `<namespace>/<name>`, the key the router knows functions by. */
export function scopeKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export class TokenScope {
  readonly functions: ReadonlySet<string> | undefined;
  readonly methods: ReadonlySet<string> | undefined;
  readonly #methodList: string;

  constructor(functions: readonly string[] | undefined, methods: readonly string[] | undefined) {
    this.functions = functions === undefined ? undefined : new Set(functions);
    this.methods = methods === undefined ? undefined : new Set(methods);
    this.#methodList = methods === undefined ? '' : methods.join(', ');
    Object.freeze(this);
  }

  /** Why `method` may not reach function `key` (`<namespace>/<name>`) with this token; undefined when it may. */
  refusal(method: string, key: string): string | undefined {
    if (this.methods !== undefined && !this.methods.has(method)) {
      return `Forbidden: method ${method} is not allowed by this token's scope (it allows ${this.#methodList})`;
    }
    if (this.functions !== undefined && !this.functions.has(key)) return `Forbidden: function ${key} is not in this token's scope`;
    return undefined;
  }

  toClaim(): ScopeClaim {
    const claim: ScopeClaim = {};
    if (this.functions !== undefined) claim.f = [...this.functions];
    if (this.methods !== undefined) claim.m = [...this.methods];
    return claim;
  }
}

function stringList(v: unknown): string[] | undefined | false {
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.length === 0 || !v.every((s) => typeof s === 'string' && s !== '')) return false;
  return v as string[];
}

/**
 * The scope of a verified token's payload: undefined when it has none,
 * `false` when the claim is there but not one we wrote. A signed token with
 * a scope we cannot read is refused rather than read as unscoped.
 */
export function scopeFromClaim(claim: unknown): TokenScope | undefined | false {
  if (claim === undefined) return undefined;
  if (claim === null || typeof claim !== 'object' || Array.isArray(claim)) return false;
  const c = claim as Record<string, unknown>;
  for (const k of Object.keys(c)) if (k !== 'f' && k !== 'm') return false;
  const f = stringList(c.f);
  const m = stringList(c.m);
  if (f === false || m === false || (f === undefined && m === undefined)) return false;
  return new TokenScope(f, m);
}
