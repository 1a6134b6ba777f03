// `flint fn test`: one call through the router's internal function path;
// and reading a function's log (`flint fn log`, and what a failing call wrote).
import { FlintError } from '../../api/errors.ts';
import { INSTANCE_PATTERN } from '../../api/function-log-line.ts';
import { isRequestId } from '../../api/request-id.ts';
import { resolveInvokeAuthorization } from '../../auth/client.ts';
import { keyValue, usage } from '../flags.ts';
import { type HttpResponse, httpRequest } from '../http.ts';
import type { Ctx } from '../io.ts';

export interface InvokeFlags {
  name: string;
  method: string;
  header?: string[];
  body?: string;
  query?: string[];
  subpath?: string;
  timeout: number;
}

// RFC 9110's token.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

async function routerUrl(c: Ctx): Promise<string> {
  if (c.io.env.FLINT_ROUTER_URL) return c.io.env.FLINT_ROUTER_URL.replace(/\/+$/, '');
  return (await c.client().info()).routerUrl.replace(/\/+$/, '');
}

export async function invokeFunction(c: Ctx, f: InvokeFlags): Promise<void> {
  const headers: Record<string, string> = {};
  for (const h of f.header ?? []) {
    const i = h.indexOf(':');
    if (i <= 0) throw usage(`--header needs "Name: value", got '${h}'`);
    const name = h.slice(0, i).trim();
    const value = h.slice(i + 1).trim();
    // Said here, before the request: node:http would refuse them with a code only.
    if (!HEADER_NAME.test(name)) throw usage(`--header name '${name}' is not a valid HTTP header name`);
    if (/[\0\r\n]/.test(value)) throw usage(`--header '${name}' has a line break or NUL in its value`);
    headers[name] = value;
  }
  const qs = new URLSearchParams();
  for (const q of f.query ?? []) {
    const [k, v] = keyValue('--query', q, { allowEqualsInValue: true });
    qs.append(k, v);
  }
  const router = await routerUrl(c);
  const auth = await resolveInvokeAuthorization(c.io.env, headers, {
    routerUrl: router,
    authUriPath: async () => (await c.client().info()).authentication.authUriPath,
  });
  if (auth.authorization) headers.authorization = auth.authorization;
  const ns = c.namespace === 'default' ? '' : `${c.namespace}/`;
  const sub = f.subpath ? (f.subpath.startsWith('/') ? f.subpath : `/${f.subpath}`) : '';
  const url = `${router}/flint-function/${ns}${f.name}${sub}${qs.size ? `?${qs}` : ''}`;
  let res: HttpResponse;
  let body: string;
  try {
    res = await httpRequest(url, { method: f.method, headers, body: f.body, timeoutMs: f.timeout * 1000 });
    body = await res.text();
  } catch (err) {
    const e = err as Error & { code?: string };
    if (e.name === 'TimeoutError') throw new FlintError('FLINT_ERR_FUNCTION_TIMEOUT', `Error calling function ${f.name}: no answer within ${f.timeout} s`);
    throw new FlintError('FLINT_ERR_UNREACHABLE', `cannot reach the router at ${router}: ${e.code ?? e.message} (set FLINT_ROUTER_URL)`);
  }
  if (res.status >= 400) {
    const said = `Error calling function ${f.name}: ${res.status}; Please try again or fix the error: ${body}`;
    // Printed to a terminal: only an id that is one (a proxy in between could send anything).
    const requestId = res.header('x-flint-request-id');
    if (!isRequestId(requestId) || refusedBeforeTheFunction(res.status, body, requestId)) throw new FlintError('FLINT_ERR_FUNCTION_ERROR', said);
    // As Fission's fn test: the error, then what the function wrote for this call, then the request.
    c.io.err(`Error: ${said}\n`);
    c.io.err(failedToLoad(body) ? await lastLinesOf(c, f.name) : await linesOfRequest(c, f.name, requestId));
    c.io.err(`Request ID: ${requestId}\n`);
    throw new FlintError('FLINT_ERR_FUNCTION_ERROR', 'error getting function response');
  }
  c.io.out(body);
}

/** Router refusals that no function ran for (its errors name their request id); its timeouts and failures are not. */
const BEFORE_THE_FUNCTION = new Set(['FLINT_ERR_UNAUTHORIZED', 'FLINT_ERR_FORBIDDEN', 'FLINT_ERR_NOT_FOUND', 'FLINT_ERR_METHOD_NOT_ALLOWED', 'FLINT_ERR_TOO_MANY_REQUESTS', 'FLINT_ERR_VALIDATION', 'FLINT_ERR_HEADERS_TOO_LARGE', 'FLINT_ERR_PAYLOAD_TOO_LARGE']);

function refusedBeforeTheFunction(status: number, body: string, requestId: string): boolean {
  try {
    const b = JSON.parse(body) as { code?: unknown; requestId?: unknown; statusCode?: unknown; message?: unknown };
    // The auth guard answers in Fission's form, {"message", "statusCode"} (DESIGN section 5).
    if (status === 401 && b.statusCode === 401 && typeof b.message === 'string') return true;
    return b.requestId === requestId && BEFORE_THE_FUNCTION.has(String(b.code));
  } catch {
    return false;
  }
}

/** The code did not load: what it printed then belongs to no request. */
function failedToLoad(body: string): boolean {
  try {
    return (JSON.parse(body) as { code?: unknown }).code === 'FLINT_ERR_SPECIALIZE_FAILED';
  } catch {
    return false;
  }
}

async function lastLinesOf(c: Ctx, name: string): Promise<string> {
  try {
    return `The function's code failed to load; the last lines of its log:\n${await (await functionLog(c, name, { tail: 20 })).text()}`;
  } catch (err) {
    return `The function's log could not be read: ${(err as Error).message}\n`;
  }
}

export interface LogQuery {
  tail: number;
  follow?: boolean;
  requestId?: string;
  instance?: string;
  detail?: boolean;
}

const INSTANCE = new RegExp(INSTANCE_PATTERN);

export async function functionLog(c: Ctx, name: string, q: LogQuery): Promise<HttpResponse> {
  // Checked here too, so a bad filter is a usage error and never part of a URL.
  if (q.requestId !== undefined && !isRequestId(q.requestId)) throw usage('--request-id must be 1-192 printable ASCII characters without spaces');
  if (q.instance !== undefined && !INSTANCE.test(q.instance)) throw usage(`--instance '${q.instance}' is not an instance name (flint fn pods lists them)`);
  const qs = new URLSearchParams({ tail: String(q.tail) });
  if (q.follow) qs.set('follow', 'true');
  if (q.requestId !== undefined) qs.set('requestId', q.requestId);
  if (q.instance !== undefined) qs.set('instance', q.instance);
  if (q.detail) qs.set('detail', 'true');
  try {
    return await c.client().raw('GET', `/v1/namespaces/${encodeURIComponent(c.namespace)}/functions/${encodeURIComponent(name)}/logs?${qs}`);
  } catch (err) {
    const e = err as Error & { status?: number };
    throw Object.assign(e, { message: `error getting logs from the controller (status ${e.status ?? 'unknown'}): ${e.message}` });
  }
}

const LOG_WAIT_TRIES = 6;
const LOG_WAIT_MS = 150;

/**
 * What the function wrote while serving the request. Its lines reach the
 * log through the executor while the answer comes back through the router,
 * so an empty answer is asked again a few times before it is believed.
 */
async function linesOfRequest(c: Ctx, name: string, requestId: string): Promise<string> {
  try {
    for (let i = 0; ; i++) {
      const text = await (await functionLog(c, name, { tail: 200, requestId })).text();
      if (text !== '' || i === LOG_WAIT_TRIES - 1) return text === '' ? 'The function wrote no log lines for this request.\n' : text;
      await new Promise((r) => setTimeout(r, LOG_WAIT_MS));
    }
  } catch (err) {
    return `The function's log could not be read: ${(err as Error).message}\n`;
  }
}
