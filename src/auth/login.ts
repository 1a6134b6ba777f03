// The router's login endpoint (`POST <authUriPath>`), as a plain node:http
// handler: `{"username","password"}` in, 201 `{"accesstoken","tokentype"}` out.
import { type AuthRequest, type AuthResponse, encodeJson, jsonBody, sendJson } from './http.ts';
import { createLoginThrottle, type LoginThrottle } from './login-throttle.ts';
import { secretMatcher } from './secret-util.ts';
import type { TokenService } from './tokens.ts';

export const INVALID_LOGIN = 'Unauthorized: invalid username or password';
/** Far more than `{"username","password"}` needs; the rest is refused unread. */
export const LOGIN_BODY_LIMIT = 8 * 1024;

export interface LoginLogger {
  warn(obj: object, msg: string): void;
}

export interface LoginHandlerOptions {
  tokens: TokenService;
  credentials: { username: string; password: string };
  logger?: LoginLogger;
  /** Failed-login slow-down; one is made with the default policy when omitted. */
  throttle?: LoginThrottle;
  /**
   * The client's address for the slow-down. Defaults to the socket's peer.
   * Behind a proxy every client shares the proxy's address; a proxy this
   * router trusts can be honoured here (e.g. its X-Forwarded-For).
   */
  clientAddress?: (req: AuthRequest) => string | undefined;
}

const invalidLogin = jsonBody(INVALID_LOGIN, 401);
const badBody = jsonBody('request body must be a JSON object with string fields "username" and "password"', 400);
const tooLarge = jsonBody(`request body is larger than ${LOGIN_BODY_LIMIT} bytes`, 413);
const notAllowed = jsonBody('method not allowed: use POST', 405);

function tooMany(seconds: number) {
  return jsonBody(`Too many failed logins from this address: try again in ${seconds} s`, 429);
}

/** Reads the body up to `limit` bytes; undefined when it is larger. */
function readBody(req: AuthRequest, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) return resolve(undefined);
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!done) resolve(Buffer.concat(chunks));
    });
    req.on('error', reject);
  });
}

function parseLogin(body: Buffer): { username: string; password: string } | 'bad-json' | 'bad-shape' {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    return 'bad-json';
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return 'bad-shape';
  const { username, password } = doc as { username?: unknown; password?: unknown };
  if (typeof username !== 'string' || typeof password !== 'string') return 'bad-shape';
  return { username, password };
}

export function createLoginHandler(opts: LoginHandlerOptions): (req: AuthRequest, res: AuthResponse) => void {
  const { tokens, logger } = opts;
  const userMatches = secretMatcher(opts.credentials.username);
  const passwordMatches = secretMatcher(opts.credentials.password);
  const throttle = opts.throttle ?? createLoginThrottle();
  const addressOf = opts.clientAddress ?? ((req: AuthRequest) => req.socket.remoteAddress);

  const refuseIfLocked = (res: AuthResponse, address: string): boolean => {
    const wait = throttle.retryAfter(address);
    if (wait === 0) return false;
    // Connection: close, since the request body may be left unread.
    sendJson(res, 429, tooMany(wait), { 'Retry-After': String(wait), Connection: 'close' });
    return true;
  };

  const handle = async (req: AuthRequest, res: AuthResponse): Promise<void> => {
    if (req.method !== 'POST') {
      sendJson(res, 405, notAllowed, { Allow: 'POST' });
      return;
    }
    const address = addressOf(req) ?? 'unknown';
    if (refuseIfLocked(res, address)) return;
    const body = await readBody(req, LOGIN_BODY_LIMIT);
    if (body === undefined) {
      sendJson(res, 413, tooLarge, { Connection: 'close' });
      return;
    }
    const login = parseLogin(body);
    if (login === 'bad-json') {
      sendJson(res, 400, jsonBody('request body is not valid JSON: send {"username": "...", "password": "..."}', 400));
      return;
    }
    if (login === 'bad-shape') {
      sendJson(res, 400, badBody);
      return;
    }
    // Checked again: other attempts from this address may have failed while
    // this body was arriving.
    if (refuseIfLocked(res, address)) return;
    // Both comparisons always run, so the answer time does not tell whether
    // the username alone was right.
    const userOk = userMatches(login.username);
    const passwordOk = passwordMatches(login.password);
    if (!(userOk && passwordOk)) {
      const lockSeconds = throttle.fail(address);
      logger?.warn({ client: address, failures: throttle.failures(address), lockSeconds }, 'router login failed');
      sendJson(res, 401, invalidLogin, lockSeconds > 0 ? { 'Retry-After': String(lockSeconds) } : {});
      return;
    }
    throttle.succeed(address);
    sendJson(res, 201, encodeJson({ accesstoken: tokens.issue(opts.credentials.username), tokentype: 'Bearer' }));
  };

  return (req, res) => {
    handle(req, res).catch((err: unknown) => {
      logger?.warn({ err }, 'router login request failed');
      if (!res.headersSent) sendJson(res, 500, jsonBody('internal error', 500), { Connection: 'close' });
      else res.destroy();
    });
  };
}
