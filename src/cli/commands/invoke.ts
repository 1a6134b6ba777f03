// `flint fn test`: one call through the router's internal function path.
import { FlintError } from '../../api/errors.ts';
import { resolveInvokeAuthorization } from '../../auth/client.ts';
import { keyValue, usage } from '../flags.ts';
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

async function routerUrl(c: Ctx): Promise<string> {
  if (c.io.env.FLINT_ROUTER_URL) return c.io.env.FLINT_ROUTER_URL.replace(/\/+$/, '');
  return (await c.client().info()).routerUrl.replace(/\/+$/, '');
}

export async function invokeFunction(c: Ctx, f: InvokeFlags): Promise<void> {
  const headers: Record<string, string> = {};
  for (const h of f.header ?? []) {
    const i = h.indexOf(':');
    if (i <= 0) throw usage(`--header needs "Name: value", got '${h}'`);
    headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
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
  let res: Response;
  try {
    res = await fetch(url, { method: f.method, headers, body: f.body, signal: AbortSignal.timeout(f.timeout * 1000) });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    if (e.name === 'TimeoutError') throw new FlintError('FLINT_ERR_FUNCTION_TIMEOUT', `Error calling function ${f.name}: no answer within ${f.timeout} s`);
    throw new FlintError('FLINT_ERR_UNREACHABLE', `cannot reach the router at ${router}: ${e.cause?.code ?? e.message} (set FLINT_ROUTER_URL)`);
  }
  const body = await res.text();
  if (res.status >= 400) {
    throw new FlintError('FLINT_ERR_FUNCTION_ERROR', `Error calling function ${f.name}: ${res.status}; Please try again or fix the error: ${body}`);
  }
  c.io.out(body);
}
