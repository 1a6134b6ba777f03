// Control-plane protection when authentication is on. The router's tokens
// protect function calls; the controller can change every function, so it
// takes either the machine-local admin token or a login token from the
// router (same username and password), never a token a component minted
// for itself, with one narrow exception: the token minted for pool pods'
// fetchers reads archives (GET /v1/archives/<sha256>) and nothing else.
import { bearerToken } from './http.ts';
import { secretMatcher } from './secret-util.ts';
import { looksLikeJwt, type TokenService } from './tokens.ts';

/** `sub` of the token kubernetes mode's executor hands pool pods' fetchers. */
export const FETCHER_SUBJECT = 'flint:fetcher';
const ARCHIVE_READ = /^\/v1\/archives\/[0-9a-f]{64}$/;

/** Paths answered without a token: liveness, and what clients need to find the router. */
export const CONTROLLER_EXEMPT_PATHS: readonly string[] = ['/healthz', '/v1/info'];

export const CONTROLLER_UNAUTHORIZED =
  'Unauthorized: the control plane needs Authorization: Bearer <admin token or router token> ' +
  '(the CLI sends FLINT_ADMIN_TOKEN, the admin-token file of FLINT_DATA_DIR, or FLINT_AUTH_TOKEN)';

/** Whether a request target (path and query) may skip the check. */
export function isControllerExempt(url: string | undefined): boolean {
  if (url === undefined) return false;
  const q = url.indexOf('?');
  return CONTROLLER_EXEMPT_PATHS.includes(q < 0 ? url : url.slice(0, q));
}

export interface ControllerAuthOptions {
  adminToken: string;
  /** The router's token service; omit to accept the admin token only. */
  tokens?: TokenService;
}

/** What a request asks for, for tokens that may do only some things. */
export interface ControllerRequest {
  method: string;
  /** Path and query. */
  url: string;
}

/** true when the `Authorization` header value grants access to the control plane, or to this request of it. */
export function createControllerAuthCheck(opts: ControllerAuthOptions): (authorization: string | undefined, req?: ControllerRequest) => boolean {
  if (opts.adminToken.length < 32) throw new Error('the admin token is too short to be one of ours');
  const isAdmin = secretMatcher(opts.adminToken);
  const { tokens } = opts;
  return (authorization, req) => {
    const token = bearerToken(authorization);
    if (token === undefined) return false;
    if (isAdmin(token)) return true;
    if (!tokens || !looksLikeJwt(token)) return false;
    const r = tokens.verify(token);
    if (!r.ok) return false;
    // Only login tokens carry `username`; minted ones are for function calls, but for the fetcher's archive reads.
    if (r.username !== undefined) return true;
    if (r.subject !== FETCHER_SUBJECT || !req || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
    const q = req.url.indexOf('?');
    return ARCHIVE_READ.test(q < 0 ? req.url : req.url.slice(0, q));
  };
}
