// Control-plane protection when authentication is on. The control plane can
// change every function and read the router secret, so it takes only what
// is the administrator's: the machine-local admin token, or a token of the
// control-plane audience (issued to the administrator by POST /v1/tokens).
// Router tokens are refused, since functions see requests that may carry
// them. One narrow exception: the archive token minted for pool pods'
// fetchers reads archives (GET /v1/archives/<sha256>) and nothing else.
import { ARCHIVES_AUDIENCE, CONTROL_PLANE_AUDIENCE, controlPlaneAudienceRefusal } from './audiences.ts';
import { basicCredentials, bearerToken } from './http.ts';
import { createLoginThrottle, type LoginThrottle } from './login-throttle.ts';
import { secretMatcher } from './secret-util.ts';
import { EXPIRED_TOKEN, looksLikeJwt, type TokenService } from './tokens.ts';

/** `sub` of the token kubernetes mode's executor hands pool pods' fetchers. */
export const FETCHER_SUBJECT = 'flint:fetcher';
const ARCHIVE_READ = /^\/v1\/archives\/[0-9a-f]{64}$/;

/** Where the administrator exchanges credentials for a token; the only path that takes Basic credentials. */
export const TOKENS_PATH = '/v1/tokens';

/** Paths answered without a token: liveness, and what clients need to find the router. */
export const CONTROLLER_EXEMPT_PATHS: readonly string[] = ['/healthz', '/v1/info', '/ui'];
/**
 * The dashboard's static files (src/ui): the page shell and its script, which hold no data; the page signs in
 * and sends a token with every API call. Only files of a fixed table are served below it (src/ui/assets.ts).
 */
export const CONTROLLER_PUBLIC_PREFIX = '/ui/';

export const CONTROLLER_UNAUTHORIZED =
  'Unauthorized: the control plane needs Authorization: Bearer <admin token or control-plane token> ' +
  '(the CLI sends FLINT_ADMIN_TOKEN, the admin-token file of FLINT_DATA_DIR, or a control-plane token it gets with FLINT_USERNAME and FLINT_PASSWORD)';
export const INVALID_ADMIN_LOGIN = 'Unauthorized: invalid username or password';

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** Whether a request target (path and query) may skip the check. */
export function isControllerExempt(url: string | undefined): boolean {
  if (url === undefined) return false;
  const p = pathOf(url);
  return CONTROLLER_EXEMPT_PATHS.includes(p) || p.startsWith(CONTROLLER_PUBLIC_PREFIX);
}

export interface ControllerAuthOptions {
  adminToken: string;
  /** The token service; omit to accept the admin token only. */
  tokens?: TokenService;
  /** The administrator's login (the router secret's username and password), taken as Basic credentials on POST /v1/tokens. */
  credentials?: { username: string; password: string };
  /** Failed-login slow-down for those credentials; one is made with the default policy when omitted. */
  throttle?: LoginThrottle;
}

/** What a request asks for, for tokens that may do only some things. */
export interface ControllerRequest {
  method: string;
  /** Path and query. */
  url: string;
  /** For the failed-login slow-down. */
  remoteAddress?: string;
}

/** Why a request is refused: the status (401, or 429 while an address is locked out), the message, and any Retry-After. */
export interface ControllerRefusal {
  status: 401 | 429;
  message: string;
  retryAfter?: number;
}

export type ControllerAuthCheck = (authorization: string | undefined, req: ControllerRequest) => ControllerRefusal | undefined;

const unauthorized = (message: string): ControllerRefusal => ({ status: 401, message });
const NO_TOKEN = unauthorized(CONTROLLER_UNAUTHORIZED);
const EXPIRED = unauthorized(`${EXPIRED_TOKEN}: get another with flint token create --audience control-plane`);

/** Undefined when the `Authorization` header value grants this request of the control plane; else why not. */
export function createControllerAuthCheck(opts: ControllerAuthOptions): ControllerAuthCheck {
  if (opts.adminToken.length < 32) throw new Error('the admin token is too short to be one of ours');
  const isAdmin = secretMatcher(opts.adminToken);
  const { tokens, credentials } = opts;
  const userMatches = credentials && secretMatcher(credentials.username);
  const passwordMatches = credentials && secretMatcher(credentials.password);
  const throttle = opts.throttle ?? createLoginThrottle();

  const checkLogin = (authorization: string | undefined, req: ControllerRequest): ControllerRefusal | undefined | 'not-basic' => {
    const login = basicCredentials(authorization);
    if (login === undefined) return 'not-basic';
    if (!userMatches || !passwordMatches || req.method !== 'POST' || pathOf(req.url) !== TOKENS_PATH) return NO_TOKEN;
    const address = req.remoteAddress ?? 'unknown';
    const wait = throttle.retryAfter(address);
    if (wait > 0) return { status: 429, message: `Too many failed logins from this address: try again in ${wait} s`, retryAfter: wait };
    // Both comparisons always run, so the answer time does not tell whether the username alone was right.
    const userOk = userMatches(login.username);
    const passwordOk = passwordMatches(login.password);
    if (userOk && passwordOk) {
      throttle.succeed(address);
      return undefined;
    }
    const lock = throttle.fail(address);
    return lock > 0 ? { status: 401, message: INVALID_ADMIN_LOGIN, retryAfter: lock } : unauthorized(INVALID_ADMIN_LOGIN);
  };

  return (authorization, req) => {
    const token = bearerToken(authorization);
    if (token === undefined) {
      const login = checkLogin(authorization, req);
      return login === 'not-basic' ? NO_TOKEN : login;
    }
    if (isAdmin(token)) return undefined;
    if (!tokens || !looksLikeJwt(token)) return NO_TOKEN;
    const r = tokens.verify(token);
    if (!r.ok) return r.message === EXPIRED_TOKEN ? EXPIRED : NO_TOKEN;
    if (r.audience === CONTROL_PLANE_AUDIENCE) return undefined;
    if (r.audience === ARCHIVES_AUDIENCE && r.subject === FETCHER_SUBJECT && (req.method === 'GET' || req.method === 'HEAD') && ARCHIVE_READ.test(pathOf(req.url))) {
      return undefined;
    }
    return unauthorized(controlPlaneAudienceRefusal(r.audience));
  };
}
