// The CLI's side of authentication: logging in at the router, choosing the
// credentials for `fn test`, and finding the control-plane token. Kept free
// of the JWT library so the CLI starts fast.
import { FlintError } from '../api/errors.ts';
import { dataLayout } from '../config/layout.ts';
import { readAdminToken } from './admin-token.ts';
import { CONTROL_PLANE_AUDIENCE } from './audiences.ts';

export const DEFAULT_AUTH_URI_PATH = '/auth/login';
export const DEFAULT_DATA_DIR = '.flint-data';
const LOGIN_TIMEOUT_MS = 10_000;

export type Env = Readonly<Record<string, string | undefined>>;

export interface FetchTokenOptions {
  routerUrl: string;
  authUriPath?: string;
  username: string;
  password: string;
  timeoutMs?: number;
}

function set(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

/** `http://host:port` + `/auth/login`, tolerating slashes on either side. */
export function loginUrl(routerUrl: string, authUriPath = DEFAULT_AUTH_URI_PATH): string {
  return `${routerUrl.replace(/\/+$/, '')}/${authUriPath.replace(/^\/+/, '')}`;
}

function causeText(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return 'no answer in time';
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(err);
}

/** Logs in at the router and returns the access token (what `flint token create` prints). */
export async function fetchToken(opts: FetchTokenOptions): Promise<string> {
  const url = loginUrl(opts.routerUrl, opts.authUriPath);
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ username: opts.username, password: opts.password }),
      signal: AbortSignal.timeout(opts.timeoutMs ?? LOGIN_TIMEOUT_MS),
    });
  } catch (err) {
    throw new FlintError(
      'FLINT_ERR_UNREACHABLE',
      `cannot reach the router at ${url} (${causeText(err)}): is 'flint server' running, and is FLINT_ROUTER_URL right?`,
      { cause: err },
    );
  }
  const text = await res.text().catch(() => '');
  if (res.status === 200 || res.status === 201) {
    let token: unknown;
    try {
      token = (JSON.parse(text) as { accesstoken?: unknown }).accesstoken;
    } catch {
      token = undefined;
    }
    if (typeof token === 'string' && token !== '') return token;
    throw new FlintError('FLINT_ERR_INTERNAL', `the login endpoint at ${url} answered ${res.status} without an access token`);
  }
  switch (res.status) {
    case 401:
      throw new FlintError('FLINT_ERR_UNAUTHORIZED', 'invalid username or password');
    case 404:
      throw new FlintError(
        'FLINT_ERR_NOT_FOUND',
        `the router has no login endpoint at ${url}: authentication may be off or the auth URI wrong (set --authuri or FLINT_AUTH_URI)`,
      );
    case 429: {
      const wait = res.headers.get('retry-after');
      throw new FlintError(
        'FLINT_ERR_TOO_MANY_REQUESTS',
        `too many failed logins from this address: try again${wait ? ` in ${wait} s` : ' later'}`,
      );
    }
  }
  const snippet = text.length > 200 ? `${text.slice(0, 200)}...` : text;
  const err = new FlintError(
    res.status >= 500 ? 'FLINT_ERR_UNAVAILABLE' : 'FLINT_ERR_VALIDATION',
    `the login endpoint at ${url} answered ${res.status}${snippet ? `: ${snippet}` : ''}`,
  );
  throw err;
}

export type InvokeAuthSource = 'header' | 'FLINT_AUTH_TOKEN' | 'login' | 'none';

export interface InvokeAuthorization {
  /**
   * The `Authorization` value to add, or undefined to add none: either there
   * are no credentials, or the caller's explicit header (source `header`)
   * already says it.
   */
  authorization: string | undefined;
  source: InvokeAuthSource;
}

export interface InvokeAuthOptions {
  routerUrl: string;
  /**
   * The login path when FLINT_AUTH_URI is unset, e.g. the server's from
   * /v1/info; a function is called only when a login actually happens.
   * Default /auth/login.
   */
  authUriPath?: string | (() => Promise<string | undefined>);
  /** Replaceable for tests. */
  login?: (opts: FetchTokenOptions) => Promise<string>;
}

/** Explicit headers as `--header "Name: value"` strings, or as a name -> value map. */
export type ExplicitHeaders = readonly string[] | Readonly<Record<string, string>>;

function explicitAuthorization(headers: ExplicitHeaders): string | undefined {
  const pairs: Array<[string, string]> = Array.isArray(headers)
    ? (headers as readonly string[]).map((h) => {
        const i = h.indexOf(':');
        return i < 0 ? [h, ''] : [h.slice(0, i), h.slice(i + 1).trim()];
      })
    : Object.entries(headers as Record<string, string>);
  return pairs.find(([name]) => name.trim().toLowerCase() === 'authorization')?.[1];
}

/**
 * Credentials for `flint fn test`, in DESIGN.md §5's order: an explicit
 * `Authorization` header wins; else FLINT_AUTH_TOKEN; else a token fetched
 * with FLINT_USERNAME and FLINT_PASSWORD; else none.
 */
export async function resolveInvokeAuthorization(env: Env, explicitHeaders: ExplicitHeaders, opts: InvokeAuthOptions): Promise<InvokeAuthorization> {
  const explicit = explicitAuthorization(explicitHeaders);
  if (explicit !== undefined) return { authorization: undefined, source: 'header' };
  const token = set(env.FLINT_AUTH_TOKEN);
  if (token !== undefined) {
    const bare = token.trim().replace(/^Bearer\s+/i, '');
    return { authorization: `Bearer ${bare}`, source: 'FLINT_AUTH_TOKEN' };
  }
  const username = set(env.FLINT_USERNAME);
  const password = set(env.FLINT_PASSWORD);
  if (username !== undefined && password !== undefined) {
    const login = opts.login ?? fetchToken;
    const configured = typeof opts.authUriPath === 'function' ? await opts.authUriPath() : opts.authUriPath;
    const authUriPath = set(env.FLINT_AUTH_URI) ?? set(configured) ?? DEFAULT_AUTH_URI_PATH;
    const fetched = await login({ routerUrl: opts.routerUrl, authUriPath, username, password });
    return { authorization: `Bearer ${fetched}`, source: 'login' };
  }
  return { authorization: undefined, source: 'none' };
}

export type ControllerTokenSource = 'FLINT_ADMIN_TOKEN' | 'admin-token file' | 'FLINT_AUTH_TOKEN' | 'FLINT_USERNAME and FLINT_PASSWORD';

export interface ControllerToken {
  /** The bearer token to send; absent when `login` is to be exchanged for one first. */
  token?: string;
  /** The administrator's username and password, exchanged at POST /v1/tokens for a control-plane token. */
  login?: { username: string; password: string };
  source: ControllerTokenSource;
  /** The admin-token file, when that is where the token came from. */
  file?: string;
}

/**
 * The `aud` a JWT says it has, read without checking its signature: only to
 * choose where the CLI sends it (the server checks everything). Undefined
 * for anything that is not a JWT with a string `aud`.
 */
export function claimedAudience(token: string): string | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const aud = (JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as { aud?: unknown }).aud;
    return typeof aud === 'string' ? aud : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What the CLI authenticates to the control plane with: FLINT_ADMIN_TOKEN
 * (the admin token, or a control-plane token); else the admin-token file
 * under FLINT_DATA_DIR (default .flint-data, relative to the working
 * directory, like the server's) when this user can read it; else
 * FLINT_AUTH_TOKEN when it is a control-plane token (a router token would be
 * refused); else FLINT_USERNAME and FLINT_PASSWORD, to exchange for a
 * control-plane token; else undefined.
 */
export function resolveControllerToken(env: Env): ControllerToken | undefined {
  const admin = set(env.FLINT_ADMIN_TOKEN);
  if (admin !== undefined) return { token: admin.trim().replace(/^Bearer\s+/i, ''), source: 'FLINT_ADMIN_TOKEN' };
  const layout = dataLayout(set(env.FLINT_DATA_DIR) ?? DEFAULT_DATA_DIR);
  try {
    const fromFile = readAdminToken(layout);
    if (fromFile !== undefined) return { token: fromFile, source: 'admin-token file', file: `${layout.private}/admin-token` };
  } catch {
    // Unreadable (another user's data directory): fall through to the next source.
  }
  const authToken = set(env.FLINT_AUTH_TOKEN)?.trim().replace(/^Bearer\s+/i, '');
  if (authToken !== undefined && claimedAudience(authToken) === CONTROL_PLANE_AUDIENCE) return { token: authToken, source: 'FLINT_AUTH_TOKEN' };
  const username = set(env.FLINT_USERNAME);
  const password = set(env.FLINT_PASSWORD);
  if (username !== undefined && password !== undefined) return { login: { username, password }, source: 'FLINT_USERNAME and FLINT_PASSWORD' };
  return undefined;
}

/** What the CLI prints when the control plane answers 401. */
export function controllerUnauthorizedHint(used: ControllerToken | undefined, env: Env = {}): string {
  const tried = used === undefined ? 'no token was sent' : `the credentials from ${used.source}${used.file ? ` (${used.file})` : ''} were refused`;
  const routerToken = used === undefined && set(env.FLINT_AUTH_TOKEN) !== undefined ? ' (FLINT_AUTH_TOKEN holds a router token, which the control plane does not take)' : '';
  return (
    `the control plane requires authentication and ${tried}${routerToken}: set FLINT_ADMIN_TOKEN to the content of <dataDir>/private/admin-token, ` +
    `run the CLI where FLINT_DATA_DIR points at the server's data directory, or set FLINT_USERNAME and FLINT_PASSWORD to the router secret's username and password`
  );
}
