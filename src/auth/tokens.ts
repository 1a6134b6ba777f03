// Flint's tokens: HS256 JWTs carrying iss, aud, sub, iat, nbf and exp (and a
// scope on scoped router tokens). The verifier is pinned to HS256, requires
// exp and iss, and maps every failure to one of the three 401 messages
// DESIGN.md §5 fixes; which audience a service takes is its own check.
import { createSigner, createVerifier } from 'fast-jwt';
import { FlintError } from '../api/errors.ts';
import { type Audience, ROUTER_AUDIENCE } from './audiences.ts';
import { SCOPE_CLAIM, scopeFromClaim, type TokenScope } from './scope.ts';
import { VerifiedTokenCache } from './token-cache.ts';

export const MALFORMED_TOKEN = 'Unauthorized: malformed Token';
export const EXPIRED_TOKEN = 'Unauthorized: token is expired';
export const INVALID_TOKEN = 'Unauthorized: invalid Token';
export type TokenFailure = typeof MALFORMED_TOKEN | typeof EXPIRED_TOKEN | typeof INVALID_TOKEN;

export interface VerifiedToken {
  ok: true;
  /** `sub`: the login's username, or the subject a component minted for itself. */
  subject: string;
  /** Set only on tokens issued to a person (login, POST /v1/tokens); minted ones carry none. */
  username: string | undefined;
  /** `aud`, when it is a single string; a token with none (or several) has no audience any service takes. */
  audience: string | undefined;
  /** Undefined: the token reaches every function (an unscoped router token). */
  scope: TokenScope | undefined;
  /** Epoch ms at which the token stops being accepted. */
  expiresAt: number;
}
export interface RejectedToken {
  ok: false;
  message: TokenFailure;
}
export type VerifyResult = VerifiedToken | RejectedToken;

export interface TokenServiceOptions {
  signingKey: string;
  issuer: string;
  /** Lifetime of tokens from `issue` (install value jwtExpiryTime). */
  expirySeconds: number;
  /** Most verified tokens kept in memory. */
  cacheSize?: number;
}

export interface TokenService {
  readonly issuer: string;
  readonly expirySeconds: number;
  /** A router login token for `username`, valid for `expirySeconds`. */
  issue(username: string): string;
  /** A token for the administrator, of any audience, lifetime and (router tokens) scope. */
  issueFor(req: IssueRequest): IssuedToken;
  /** A short-lived token for Flint's own callers (the trigger manager, fetchers); no `username` claim. */
  mint(subject: string, ttlSeconds?: number, audience?: Audience): string;
  verify(token: string | undefined): VerifyResult;
  readonly cacheStats: { readonly hits: number; readonly misses: number; readonly size: number };
}

export interface IssueRequest {
  audience: Audience;
  username: string;
  ttlSeconds: number;
  scope?: TokenScope;
}

export interface IssuedToken {
  token: string;
  /** Epoch ms. */
  expiresAt: number;
}

export const MAX_MINT_TTL_SECONDS = 3600;
const DEFAULT_MINT_TTL_SECONDS = 60;
/** Longer than any token we issue; a longer header value is refused before parsing. */
const MAX_TOKEN_LENGTH = 4096;
// Three base64url segments; the signature may be empty so that an unsigned
// (`alg: none`) token reaches the verifier and is refused as invalid, not malformed.
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

const rejected = {
  malformed: Object.freeze({ ok: false, message: MALFORMED_TOKEN }) as RejectedToken,
  expired: Object.freeze({ ok: false, message: EXPIRED_TOKEN }) as RejectedToken,
  invalid: Object.freeze({ ok: false, message: INVALID_TOKEN }) as RejectedToken,
};

/** Whether a string has the outward shape of a JWT (three base64url parts). */
export function looksLikeJwt(token: string): boolean {
  return token.length <= MAX_TOKEN_LENGTH && JWT_SHAPE.test(token);
}

function failureOf(err: unknown): RejectedToken {
  switch ((err as { code?: string }).code) {
    case 'FAST_JWT_MALFORMED':
    case 'FAST_JWT_INVALID_PAYLOAD':
    case 'FAST_JWT_INVALID_TYPE':
      return rejected.malformed;
    // fast-jwt checks the signature before the dates, so "expired" is only
    // ever said about a token we really signed.
    case 'FAST_JWT_EXPIRED':
      return rejected.expired;
    default:
      return rejected.invalid;
  }
}

export function createTokenService(opts: TokenServiceOptions): TokenService {
  const { signingKey, issuer, expirySeconds } = opts;
  if (typeof signingKey !== 'string' || signingKey === '') throw new FlintError('FLINT_ERR_CONFIG', 'the JWT signing key is empty');
  if (typeof issuer !== 'string' || issuer === '') throw new FlintError('FLINT_ERR_CONFIG', 'the JWT issuer is empty');
  if (!Number.isInteger(expirySeconds) || expirySeconds < 1) {
    throw new FlintError('FLINT_ERR_CONFIG', `the JWT expiry must be a whole number of seconds >= 1, got ${expirySeconds}`);
  }
  const sign = createSigner({ key: signingKey, algorithm: 'HS256' });
  const verifyJwt = createVerifier({
    key: signingKey,
    algorithms: ['HS256'],
    allowedIss: issuer,
    requiredClaims: ['exp', 'iss'],
    // Our own cache below bounds entries by exp exactly; fast-jwt's would
    // duplicate the work and also cache failures.
    cache: false,
  });
  const cache = new VerifiedTokenCache<VerifiedToken>(opts.cacheSize ?? 10_000);

  const signWith = (claims: Record<string, unknown>, ttlSeconds: number): IssuedToken => {
    const iat = Math.floor(Date.now() / 1000);
    const exp = iat + ttlSeconds;
    return { token: sign({ iss: issuer, ...claims, iat, nbf: iat, exp }), expiresAt: exp * 1000 };
  };
  const signFor = (claims: Record<string, unknown>, ttlSeconds: number): string => signWith(claims, ttlSeconds).token;

  return {
    issuer,
    expirySeconds,
    issue(username) {
      if (typeof username !== 'string' || username === '') throw new FlintError('FLINT_ERR_VALIDATION', 'username must not be empty');
      return signFor({ aud: ROUTER_AUDIENCE, sub: username, username }, expirySeconds);
    },
    issueFor({ audience, username, ttlSeconds, scope }) {
      if (typeof username !== 'string' || username === '') throw new FlintError('FLINT_ERR_VALIDATION', 'username must not be empty');
      if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1) throw new FlintError('FLINT_ERR_VALIDATION', `a token lives 1 second or more, got ${ttlSeconds}`);
      if (scope !== undefined && audience !== ROUTER_AUDIENCE) throw new FlintError('FLINT_ERR_VALIDATION', 'only router tokens have a scope');
      const claims: Record<string, unknown> = { aud: audience, sub: username, username };
      if (scope !== undefined) claims[SCOPE_CLAIM] = scope.toClaim();
      return signWith(claims, ttlSeconds);
    },
    mint(subject, ttlSeconds = DEFAULT_MINT_TTL_SECONDS, audience = ROUTER_AUDIENCE) {
      if (typeof subject !== 'string' || subject === '') throw new FlintError('FLINT_ERR_VALIDATION', 'subject must not be empty');
      if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_MINT_TTL_SECONDS) {
        throw new FlintError('FLINT_ERR_VALIDATION', `a minted token lives 1 to ${MAX_MINT_TTL_SECONDS} seconds, got ${ttlSeconds}`);
      }
      return signFor({ aud: audience, sub: subject }, ttlSeconds);
    },
    verify(token) {
      if (typeof token !== 'string' || token === '') return rejected.malformed;
      const now = Date.now();
      const cached = cache.get(token, now);
      if (cached !== undefined) return cached;
      if (!looksLikeJwt(token)) return rejected.malformed;
      let payload: Record<string, unknown>;
      try {
        payload = verifyJwt(token);
      } catch (err) {
        return failureOf(err);
      }
      const expiresAt = (payload.exp as number) * 1000;
      // RFC 7519: the token is expired *at* exp; fast-jwt still accepts that
      // very millisecond, and the cache must agree with whichever is stricter.
      if (Date.now() >= expiresAt) return rejected.expired;
      const scope = scopeFromClaim(payload[SCOPE_CLAIM]);
      if (scope === false) return rejected.invalid;
      // Frozen: the same object is handed to every caller on a cache hit.
      const result: VerifiedToken = Object.freeze({
        ok: true,
        subject: typeof payload.sub === 'string' ? payload.sub : '',
        username: typeof payload.username === 'string' ? payload.username : undefined,
        audience: typeof payload.aud === 'string' ? payload.aud : undefined,
        scope,
        expiresAt,
      });
      cache.set(token, result, expiresAt);
      return result;
    },
    get cacheStats() {
      return { hits: cache.hits, misses: cache.misses, size: cache.size };
    },
  };
}
