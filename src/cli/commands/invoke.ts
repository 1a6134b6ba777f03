// `flint fn test`: one call through the router's internal function path.
import { FlintError } from '../../api/errors.ts';
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
    throw new FlintError('FLINT_ERR_FUNCTION_ERROR', `Error calling function ${f.name}: ${res.status}; Please try again or fix the error: ${body}`);
  }
  c.io.out(body);
}
