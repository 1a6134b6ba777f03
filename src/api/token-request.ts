// What the administrator asks for at POST /v1/tokens (and `flint token
// create` checks before sending): an audience, a lifetime, and for router
// tokens an optional scope. Checked loudly here, naming the field, so the CLI
// and the API refuse the same things with the same words.
import { type Static, Type } from '@sinclair/typebox';
import { FlintError, invalid } from './errors.ts';
import { HTTP_METHOD_NAMES } from './kinds.ts';
import { DEFAULT_NAMESPACE, DNS1123_LABEL, DNS1123_MAX } from './meta.ts';

/** The longest life a token from POST /v1/tokens may have: a day, so a leaked one does not work for long. */
export const MAX_TOKEN_TTL_SECONDS = 24 * 3600;
export const MAX_TOKEN_TTL_TEXT = '24h';
/** Most functions one scoped token may name: every name travels in each request's token. */
export const MAX_SCOPE_FUNCTIONS = 50;

export const TokenRequestSchema = Type.Object(
  {
    audience: Type.Optional(Type.Union([Type.Literal('router'), Type.Literal('control-plane')], { description: 'default router' })),
    functions: Type.Optional(Type.Array(Type.String(), { description: 'router tokens: the only functions the token may call' })),
    namespace: Type.Optional(Type.String({ description: 'the namespace of `functions` (default "default")' })),
    methods: Type.Optional(Type.Array(Type.String(), { description: 'router tokens: the only HTTP methods the token may use' })),
    ttl: Type.Optional(Type.String({ description: `lifetime, e.g. 90s, 10m, 1h30m; at most ${MAX_TOKEN_TTL_TEXT}; default authentication.jwtExpiryTime` })),
  },
  { additionalProperties: false },
);

export const TokenResponseSchema = Type.Object({
  accesstoken: Type.String(),
  tokentype: Type.Literal('Bearer'),
  audience: Type.String(),
  /** RFC 3339 */
  expiresAt: Type.String(),
});
export type TokenResponse = Static<typeof TokenResponseSchema>;

export interface TokenRequest {
  audience: 'router' | 'control-plane';
  /** Function keys `<namespace>/<name>`; undefined: every function. */
  functions: string[] | undefined;
  /** Upper-case methods; undefined: every method. */
  methods: string[] | undefined;
  /** Undefined: the install's jwtExpiryTime. */
  ttlSeconds: number | undefined;
}

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600 };
const DURATION = /^(?:\d+[smh])+$/;

/** `90s`, `10m`, `1h30m` in seconds; a bare number, another unit or zero is refused naming `field`. */
export function parseTtl(text: string, field = 'ttl'): number {
  const t = text.trim();
  if (!DURATION.test(t)) throw invalid(field, `'${text}' is not a duration: use a number and a unit, s, m or h (90s, 10m, 1h30m)`);
  let seconds = 0;
  for (const [, n, unit] of t.matchAll(/(\d+)([smh])/g)) seconds += Number(n) * UNIT_SECONDS[unit];
  if (seconds < 1) throw invalid(field, `'${text}' is no time at all: a token must live 1s or more`);
  if (seconds > MAX_TOKEN_TTL_SECONDS) throw invalid(field, `'${text}' is longer than the most a token may live, ${MAX_TOKEN_TTL_TEXT}`);
  return seconds;
}

const NAME = new RegExp(DNS1123_LABEL);

function name(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '') throw invalid(field, 'must be a non-empty name');
  if (value.length > DNS1123_MAX || !NAME.test(value)) {
    throw invalid(field, `'${value}' is not a valid name: use lowercase letters, digits and '-', starting and ending with a letter or digit (at most 63 characters)`);
  }
  return value;
}

function list(value: unknown, field: string): unknown[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) throw invalid(field, 'must be a list');
  if (value.length === 0) throw invalid(field, 'must not be empty: leave it out for no limit');
  return value;
}

/** The request, normalized; throws FLINT_ERR_VALIDATION naming the first bad field. */
export function validateTokenRequest(body: unknown): TokenRequest {
  if (body === undefined || body === null) body = {};
  if (typeof body !== 'object' || Array.isArray(body)) throw new FlintError('FLINT_ERR_VALIDATION', 'the request body must be a JSON object');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (!Object.hasOwn(TokenRequestSchema.properties, k)) throw invalid(k, 'unknown field');
  const audience = b.audience ?? 'router';
  if (audience !== 'router' && audience !== 'control-plane') throw invalid('audience', `must be "router" or "control-plane", got ${JSON.stringify(audience)}`);
  if (b.namespace !== undefined && b.functions === undefined) throw invalid('namespace', 'names the namespace of the functions: give functions too');
  const namespace = b.namespace === undefined ? DEFAULT_NAMESPACE : name(b.namespace, 'namespace');
  const fnList = list(b.functions, 'functions');
  const methodList = list(b.methods, 'methods');
  if (audience !== 'router' && (fnList !== undefined || methodList !== undefined)) {
    throw invalid(fnList !== undefined ? 'functions' : 'methods', 'only router tokens have a scope: a control-plane token is the administrator\'s');
  }
  if (fnList !== undefined && fnList.length > MAX_SCOPE_FUNCTIONS) throw invalid('functions', `names more than ${MAX_SCOPE_FUNCTIONS} functions`);
  const functions = fnList === undefined ? undefined : [...new Set(fnList.map((f, i) => `${namespace}/${name(f, `functions[${i}]`)}`))];
  const methods =
    methodList === undefined
      ? undefined
      : [
          ...new Set(
            methodList.map((m, i) => {
              const upper = typeof m === 'string' ? m.toUpperCase() : '';
              if (!HTTP_METHOD_NAMES.includes(upper)) throw invalid(`methods[${i}]`, `${JSON.stringify(m)} is not an HTTP method: use one of ${HTTP_METHOD_NAMES.join(', ')}`);
              return upper;
            }),
          ),
        ];
  if (b.ttl !== undefined && typeof b.ttl !== 'string') throw invalid('ttl', 'must be a duration such as "1h"');
  const ttlSeconds = b.ttl === undefined ? undefined : parseTtl(b.ttl);
  return { audience, functions, methods, ttlSeconds };
}
