// The router's auth check, run before route matching so that an
// unauthenticated caller learns nothing about which routes exist. A scoped
// token's limits can only be checked once the route names its function, so
// the guard hands the scope on to the router instead.
import { ARCHIVES_AUDIENCE, CONTROL_PLANE_AUDIENCE, ROUTER_AUDIENCE, routerAudienceRefusal } from './audiences.ts';
import { type AuthRequest, type AuthResponse, bearerToken, type JsonBody, jsonBody, sendJson } from './http.ts';
import type { TokenScope } from './scope.ts';
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
 * true: the request may go on to routing; false: the guard has answered it;
 * a scope: it may go on, to the functions and methods the scope allows.
 * Pass the router's own parse of the path as `info.path` so both agree on
 * what the exemptions match (e.g. for absolute-form request targets).
 */
export type RouterGuard = (req: AuthRequest, res: AuthResponse, info?: { readonly path: string }) => boolean | TokenScope;

const bodies: Record<TokenFailure, JsonBody> = {
  [MALFORMED_TOKEN]: jsonBody(MALFORMED_TOKEN, 401),
  [EXPIRED_TOKEN]: jsonBody(EXPIRED_TOKEN, 401),
  [INVALID_TOKEN]: jsonBody(INVALID_TOKEN, 401),
};
const challenge = { 'WWW-Authenticate': 'Bearer' };
const wrongAudience: Record<string, JsonBody> = {
  [CONTROL_PLANE_AUDIENCE]: jsonBody(routerAudienceRefusal(CONTROL_PLANE_AUDIENCE), 401),
  [ARCHIVES_AUDIENCE]: jsonBody(routerAudienceRefusal(ARCHIVES_AUDIENCE), 401),
};
const noAudience = jsonBody(routerAudienceRefusal(undefined), 401);
const otherAudience = jsonBody(routerAudienceRefusal('other'), 401);

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
    if (!result.ok) {
      sendUnauthorized(res, result.message);
      return false;
    }
    if (result.audience !== ROUTER_AUDIENCE) {
      const body = result.audience === undefined ? noAudience : (wrongAudience[result.audience] ?? otherAudience);
      sendJson(res, 401, body, challenge);
      return false;
    }
    return result.scope ?? true;
  };
}
