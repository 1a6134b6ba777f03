// `POST /v1/namespaces/{ns}/functions/{name}/invoke`: the dashboard's "call
// this function". The control plane sends the request to the router's
// internal function path, as `flint fn test` does, with a router token it
// mints for this one function and method for a minute: the browser never
// holds the signing key nor a router token, and the router stays on its
// own origin (no CORS to open). What comes back is reported, not passed
// through: status, headers, the body as text (cut at MAX_INVOKE_BODY), the
// duration and the request id the function log's lines carry.
import type { FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { type InvokeRequest, InvokeRequestSchema, InvokeResultSchema, MAX_INVOKE_BODY, validateInvokeRequest } from '../api/invoke-request.ts';
import { isRequestId } from '../api/request-id.ts';
import { NameParams } from '../api/params.ts';
import type { TokenIssuer } from '../auth/issuer.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

const TOKEN_TTL_SECONDS = 60;
/** Beyond the function's own timeout, after which the router answers 504 itself. */
const TIMEOUT_GRACE_SECONDS = 15;

async function readCapped(res: Response): Promise<{ bytes: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  if (!res.body) return { bytes: Buffer.alloc(0), truncated: false };
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { bytes: Buffer.concat(chunks), truncated: false };
    chunks.push(Buffer.from(value));
    size += value.byteLength;
    if (size > MAX_INVOKE_BODY) {
      await reader.cancel();
      return { bytes: Buffer.concat(chunks).subarray(0, MAX_INVOKE_BODY), truncated: true };
    }
  }
}

function targetUrl(routerUrl: string, namespace: string, name: string, r: InvokeRequest): string {
  const qs = new URLSearchParams(r.query).toString();
  return `${routerUrl.replace(/\/+$/, '')}/flint-function/${namespace}/${name}${r.path === '/' ? '' : r.path}${qs ? `?${qs}` : ''}`;
}

export function registerInvokeRoute(app: FastifyInstance, store: Store, routerUrl: () => string, issue: TokenIssuer | undefined): void {
  app.post<{ Params: { namespace: string; name: string } }>(
    '/v1/namespaces/:namespace/functions/:name/invoke',
    {
      schema: {
        tags: ['functions'],
        summary: 'Call a function through the router and report its answer (the dashboard\'s test call)',
        description:
          'The control plane calls the internal function path with a router token scoped to this function and method. ' +
          'A function that answers with an error is still a 200 here: its status is in the result.',
        params: NameParams,
        body: InvokeRequestSchema,
        response: { 200: InvokeResultSchema, ...errorResponses(404, 503) },
      },
    },
    async (req) => {
      const { namespace, name } = req.params;
      const r = validateInvokeRequest(req.body);
      const fn = await store.get('Function', namespace, name);
      if (!fn) throw new FlintError('FLINT_ERR_NOT_FOUND', `function '${name}' not found in namespace '${namespace}'`);
      const headers: Record<string, string> = { ...r.headers };
      // As `flint fn test`: an Authorization the caller wrote wins over the one minted here.
      const hasAuth = Object.keys(headers).some((h) => h.toLowerCase() === 'authorization');
      if (issue && !hasAuth) {
        const token = issue({ audience: 'router', functions: [`${namespace}/${name}`], methods: [r.method], ttlSeconds: TOKEN_TTL_SECONDS });
        headers.authorization = `Bearer ${token.accesstoken}`;
      }
      const router = routerUrl();
      const timeoutSeconds = (typeof fn.spec.functionTimeout === 'number' ? fn.spec.functionTimeout : 60) + TIMEOUT_GRACE_SECONDS;
      const started = performance.now();
      let res: Response;
      try {
        res = await fetch(targetUrl(router, namespace, name, r), {
          method: r.method,
          headers,
          body: r.body,
          redirect: 'manual',
          signal: AbortSignal.timeout(timeoutSeconds * 1000),
        });
      } catch (err) {
        const e = err as Error & { cause?: { code?: string } };
        if (e.name === 'TimeoutError') throw new FlintError('FLINT_ERR_UNREACHABLE', `the router did not answer within ${timeoutSeconds} s`);
        throw new FlintError('FLINT_ERR_UNREACHABLE', `cannot reach the router at ${router}: ${e.cause?.code ?? e.message}`);
      }
      const { bytes, truncated } = await readCapped(res);
      const durationMs = Math.round((performance.now() - started) * 10) / 10;
      const requestId = res.headers.get('x-flint-request-id') ?? undefined;
      return {
        status: res.status,
        headers: Object.fromEntries(res.headers),
        body: bytes.toString('utf8'),
        truncated,
        durationMs,
        ...(isRequestId(requestId) ? { requestId } : {}),
      };
    },
  );
}
