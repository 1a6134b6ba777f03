// The router's auth check, run before route matching so that an
// unauthenticated caller learns nothing about which routes exist.
import { type AuthRequest, type AuthResponse, bearerToken, type JsonBody, jsonBody, sendJson } from './http.ts';
import { EXPIRED_TOKEN, INVALID_TOKEN, MALFORMED_TOKEN, type TokenFailure, type TokenService } from './tokens.ts';

/** The router's liveness path; reachable without a token so probes need no credentials. */
export const ROUTER_HEALTH_PATH = '/router-healthz';

export interface RouterGuardOptions {
  tokens: TokenService;
  /** install value authentication.authUriPath */
  authUriPath: string;
  /** Answers requests to `authUriPath` (createLoginHandler). */
  login: (req: AuthRequest, res: AuthResponse) => void;
}

/**
 * true: the request may go on to routing; false: the guard has answered it.
 * Pass the router's own parse of the path as `info.path` so both agree on
 * what the exemptions match (e.g. for absolute-form request targets).
 */
export type RouterGuard = (req: AuthRequest, res: AuthResponse, info?: { readonly path: string }) => boolean;

const bodies: Record<TokenFailure, JsonBody> = {
  [MALFORMED_TOKEN]: jsonBody(MALFORMED_TOKEN, 401),
  [EXPIRED_TOKEN]: jsonBody(EXPIRED_TOKEN, 401),
  [INVALID_TOKEN]: jsonBody(INVALID_TOKEN, 401),
};
const challenge = { 'WWW-Authenticate': 'Bearer' };

/** The path of a request target, without the query; exemptions match it exactly. */
function pathOf(url: string | undefined): string {
  if (url === undefined) return '';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

export function sendUnauthorized(res: AuthResponse, message: TokenFailure): void {
  sendJson(res, 401, bodies[message], challenge);
}

export function createRouterGuard(opts: RouterGuardOptions): RouterGuard {
  const { tokens, authUriPath, login } = opts;
  return (req, res, info) => {
    const path = info?.path ?? pathOf(req.url);
    if (path === ROUTER_HEALTH_PATH) return true;
    if (path === authUriPath) {
      login(req, res);
      return false;
    }
    const token = bearerToken(req.headers.authorization);
    if (token === undefined) {
      sendUnauthorized(res, MALFORMED_TOKEN);
      return false;
    }
    const result = tokens.verify(token);
    if (result.ok) return true;
    sendUnauthorized(res, result.message);
    return false;
  };
}
