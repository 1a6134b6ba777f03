// The router: the public data plane. Plain node:http on the hot path: match
// a route (or the internal function path), lease an instance from the
// executor, stream the request to it over a keep-alive Unix-socket pool and
// stream the answer back.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import { type ErrorCode, ErrorCodes, isFlintError } from '../api/errors.ts';
import type { FunctionResource, HTTPTrigger } from '../api/kinds.ts';
import type { Executor, Lease } from '../executor/types.ts';
import type { Store, Watch } from '../store/store.ts';
import { createRouterMetrics, type RouterMetrics } from './metrics.ts';
import { RouteTable } from './route-table.ts';
import { Upstreams } from './upstreams.ts';

/** Runs before routing; returns false when it has answered the request itself. */
export type RouterHook = (req: http.IncomingMessage, res: http.ServerResponse) => boolean;

export interface RouterOptions {
  store: Store;
  executor: Executor;
  logger: Logger;
  host: string;
  port: number;
  hooks?: RouterHook[];
}

export const INTERNAL_PREFIX = '/flint-function/';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'expect', 'proxy-authorization']);
const RESPONSE_DROP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'trailer', 'upgrade']);

const idPrefix = randomBytes(4).toString('hex');
let idCounter = 0;
function requestId(given: string | string[] | undefined): string {
  if (typeof given === 'string' && given.length > 0 && given.length <= 128 && /^[\w.:-]+$/.test(given)) return given;
  idCounter = (idCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${idPrefix}-${idCounter.toString(36)}`;
}

function sendError(res: http.ServerResponse, code: ErrorCode, message: string, reqId: string, extra?: Record<string, string>): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ code, message, requestId: reqId });
  res.writeHead(ErrorCodes[code].status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-flint-request-id': reqId,
    ...extra,
  });
  res.end(body);
}

interface Target {
  fn: FunctionResource;
  forwardPath: string;
  params: Record<string, string>;
}

export class Router {
  readonly #o: RouterOptions;
  readonly #server: http.Server;
  readonly #upstreams = new Upstreams();
  readonly metrics: RouterMetrics = createRouterMetrics();
  #table = new RouteTable([], new Map());
  readonly #functions = new Map<string, FunctionResource>();
  readonly #triggers = new Map<string, HTTPTrigger>();
  readonly #watches: Watch[] = [];
  #rebuildScheduled = false;
  #url = '';

  constructor(opts: RouterOptions) {
    this.#o = opts;
    this.#server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => this.#handle(req, res));
    this.#server.headersTimeout = 66_000;
    this.#server.requestTimeout = 0;
  }

  get url(): string {
    return this.#url;
  }

  /** How many routes are live (tests wait on this). */
  get routeCount(): number {
    return this.#table.size;
  }

  async start(): Promise<{ url: string }> {
    const { store } = this.#o;
    const fns = await store.list('Function');
    for (const f of fns.items) this.#functions.set(`${f.metadata.namespace}/${f.metadata.name}`, f);
    const trs = await store.list('HTTPTrigger');
    for (const t of trs.items) this.#triggers.set(`${t.metadata.namespace}/${t.metadata.name}`, t);
    this.#rebuild();
    this.#watches.push(
      store.watch({ kind: 'Function', sinceResourceVersion: fns.resourceVersion }, (ev) => {
        const key = `${ev.object.metadata.namespace}/${ev.object.metadata.name}`;
        if (ev.type === 'DELETED') this.#functions.delete(key);
        else this.#functions.set(key, ev.object as FunctionResource);
        this.#scheduleRebuild();
      }),
      store.watch({ kind: 'HTTPTrigger', sinceResourceVersion: trs.resourceVersion }, (ev) => {
        const key = `${ev.object.metadata.namespace}/${ev.object.metadata.name}`;
        if (ev.type === 'DELETED') this.#triggers.delete(key);
        else this.#triggers.set(key, ev.object as HTTPTrigger);
        this.#scheduleRebuild();
      }),
    );
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#o.port, this.#o.host, () => resolve());
    });
    const a = this.#server.address() as AddressInfo;
    this.#url = `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
    return { url: this.#url };
  }

  async stop(): Promise<void> {
    for (const w of this.#watches.splice(0)) w.close();
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
    await this.#upstreams.close();
  }

  #scheduleRebuild(): void {
    if (this.#rebuildScheduled) return;
    this.#rebuildScheduled = true;
    setImmediate(() => {
      this.#rebuildScheduled = false;
      this.#rebuild();
    });
  }

  #rebuild(): void {
    this.#table = new RouteTable([...this.#triggers.values()], this.#functions, (t, why) =>
      this.#o.logger.debug({ trigger: t.metadata.name, why }, 'route skipped'),
    );
  }

  #internalTarget(path: string): Target | undefined {
    const rest = path.slice(INTERNAL_PREFIX.length);
    const s1 = rest.indexOf('/');
    const first = s1 < 0 ? rest : rest.slice(0, s1);
    if (!first) return undefined;
    if (s1 >= 0) {
      const after = rest.slice(s1 + 1);
      const s2 = after.indexOf('/');
      const second = s2 < 0 ? after : after.slice(0, s2);
      const namespaced = second ? this.#functions.get(`${first}/${second}`) : undefined;
      if (namespaced) return { fn: namespaced, forwardPath: s2 < 0 ? '/' : after.slice(s2), params: {} };
    }
    const fn = this.#functions.get(`default/${first}`);
    if (!fn) return undefined;
    return { fn, forwardPath: s1 < 0 ? '/' : rest.slice(s1), params: {} };
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (path === '/router-healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return;
    }
    const hooks = this.#o.hooks;
    if (hooks) for (const h of hooks) if (!h(req, res)) return;
    const reqId = requestId(req.headers['x-flint-request-id']);
    if (path === '/metrics' && req.method === 'GET') {
      void this.metrics.registry.metrics().then((text) => {
        res.writeHead(200, { 'content-type': this.metrics.registry.contentType });
        res.end(text);
      });
      return;
    }
    const method = req.method ?? 'GET';
    let target: Target | undefined;
    if (path.startsWith(INTERNAL_PREFIX)) {
      target = this.#internalTarget(path);
      if (!target) return this.#miss(res, method, 404, 'FLINT_ERR_NOT_FOUND', `no function at ${path}`, reqId);
    } else {
      const host = req.headers.host;
      const m = this.#table.match(method, host, path);
      if (m.kind === 'none') return this.#miss(res, method, 404, 'FLINT_ERR_NOT_FOUND', `no route for ${method} ${path}`, reqId);
      if (m.kind === 'method') {
        return this.#miss(res, method, 405, 'FLINT_ERR_METHOD_NOT_ALLOWED', `method ${method} is not allowed on ${path}`, reqId, { allow: m.allow });
      }
      target = m.match;
    }
    const forwardUrl = q < 0 ? target.forwardPath : target.forwardPath + url.slice(q);
    void this.#proxy(req, res, target, forwardUrl, url, reqId);
  }

  #miss(res: http.ServerResponse, method: string, status: number, code: ErrorCode, message: string, reqId: string, extra?: Record<string, string>): void {
    this.metrics.requests.inc({ code: String(status), method, function: '' });
    sendError(res, code, message, reqId, extra);
  }

  async #proxy(req: http.IncomingMessage, res: http.ServerResponse, target: Target, forwardUrl: string, fullUrl: string, reqId: string): Promise<void> {
    const { fn } = target;
    const fnName = fn.metadata.name;
    const method = req.method ?? 'GET';
    const started = process.hrtime.bigint();
    const abort = new AbortController();
    let timedOut = false;
    let lease: Lease | undefined;
    const timeoutMs = (fn.spec.functionTimeout ?? 60) * 1000;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, timeoutMs);
    const onClientClose = () => {
      if (!res.writableFinished) abort.abort();
    };
    res.once('close', onClientClose);
    this.metrics.inFlight.inc();
    let status = 502;
    try {
      lease = await this.#o.executor.acquire(fn, abort.signal);
      if (lease.coldStart) this.metrics.coldStarts.inc({ function: fnName });
      const headers: Record<string, string | string[]> = {};
      const raw = req.headers;
      for (const k in raw) {
        if (!HOP_BY_HOP.has(k)) headers[k] = raw[k] as string | string[];
      }
      headers['x-flint-function-name'] = fnName;
      headers['x-flint-function-namespace'] = fn.metadata.namespace;
      headers['x-flint-function-uid'] = fn.metadata.uid;
      headers['x-flint-function-resourceversion'] = fn.metadata.resourceVersion;
      headers['x-flint-full-url'] = fullUrl;
      headers['x-flint-request-id'] = reqId;
      for (const p in target.params) headers[`x-flint-params-${p.toLowerCase()}`] = target.params[p];
      const origHost = raw.host;
      if (origHost && raw['x-forwarded-host'] === undefined && raw.forwarded === undefined) {
        headers['x-forwarded-host'] = origHost;
        headers.forwarded = `host=${origHost.includes(':') && origHost.startsWith('[') ? `"${origHost}"` : origHost};`;
      }
      const remote = req.socket.remoteAddress;
      if (remote) headers['x-forwarded-for'] = raw['x-forwarded-for'] ? `${raw['x-forwarded-for']}, ${remote}` : remote;
      const hasBody = raw['content-length'] !== undefined ? raw['content-length'] !== '0' : raw['transfer-encoding'] !== undefined;
      const upstream = await this.#upstreams.get(lease.socketPath as string).request({
        method: method as any,
        path: forwardUrl,
        headers,
        body: hasBody ? req : null,
        signal: abort.signal,
      });
      status = upstream.statusCode;
      const out: Record<string, string | string[]> = {};
      for (const k in upstream.headers) {
        if (!RESPONSE_DROP.has(k) && k !== 'x-flint-route-miss') out[k] = upstream.headers[k] as string | string[];
      }
      out['x-flint-request-id'] = reqId;
      res.writeHead(status, out);
      await pipeline(upstream.body, res);
      lease.release('ok');
      lease = undefined;
    } catch (err) {
      if (timedOut) {
        status = 504;
        lease?.release('timeout');
        lease = undefined;
        sendError(res, 'FLINT_ERR_FUNCTION_TIMEOUT', `function '${fnName}' did not answer within ${fn.spec.functionTimeout ?? 60} s`, reqId);
      } else if (isFlintError(err)) {
        status = err.status;
        sendError(res, err.code, err.message, reqId);
      } else if (abort.signal.aborted) {
        status = 499;
        res.destroy();
      } else {
        status = 502;
        const code = (err as { code?: string })?.code ?? '';
        lease?.release('unreachable');
        lease = undefined;
        this.#o.logger.warn({ fn: fnName, err: (err as Error).message, code, reqId }, 'function unreachable');
        sendError(res, 'FLINT_ERR_FUNCTION_UNREACHABLE', `function '${fnName}' is unreachable: its instance closed the connection (${(err as Error).message})`, reqId);
      }
    } finally {
      clearTimeout(timer);
      res.off('close', onClientClose);
      lease?.release('ok');
      this.metrics.inFlight.dec();
      this.metrics.requests.inc({ code: String(status), method, function: fnName });
      this.metrics.duration.observe({ function: fnName }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }
}

export function createRouter(opts: RouterOptions): Router {
  return new Router(opts);
}

