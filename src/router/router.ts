// The router: Flint's public data plane, on its own HTTP/1.1 server
// (http1/server.ts says why not node:http): router-owned endpoints, then the
// auth seam, then the internal function path or the route table, then the
// proxy.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { FlintError } from '../api/errors.ts';
import type { Executor } from '../executor/types.ts';
import type { Store } from '../store/store.ts';
import type { Tracer } from '../tracing/types.ts';
import { type AccessLog, accessEntry } from './access-log.ts';
import { forwardedHost, type RequestClasses, requestClasses, type ScannedRequest, scanRequest } from './forward-headers.ts';
import type { Http1Request } from './http1/request.ts';
import type { Http1Response } from './http1/response.ts';
import { Http1Server } from './http1/server.ts';
import { INTERNAL_PREFIX, resolveInternal } from './internal-path.ts';
import type { ConnectionDrop } from '../limits/connection-admission.ts';
import type { NodeServerLimits } from '../limits/node-server.ts';
import { RouterMetrics } from './metrics.ts';
import { ProxyCall, type ProxyDeps } from './proxy.ts';
import { REQUEST_ID_HEADER, sendEmpty, sendError } from './reply.ts';
import { requestIdFrom } from './request-id.ts';
import { RequestTrace } from './request-trace.ts';
import { RouteSource } from './route-source.ts';
import { FORWARD_BELOW, FORWARD_ROOT, type RouteHit } from './route-table.ts';
import { type Backend, FnTarget, pickTarget } from './targets.ts';
import { Tunnels } from './tunnel.ts';
import { Upstreams } from './upstreams.ts';

export { INTERNAL_PREFIX } from './internal-path.ts';

/** What the router already knows about a request when a hook sees it. */
export interface RequestInfo {
  readonly requestId: string;
  readonly method: string;
  /** The path without the query. */
  readonly path: string;
}

/**
 * Limits on where a request the auth seam let through may go (a scoped
 * token's). Checked once the route names the function, before it is called.
 */
export interface TargetGate {
  /** Why `method` may not reach function `key` (`<namespace>/<name>`); undefined when it may. */
  refusal(method: string, key: string): string | undefined;
}

/**
 * Runs before route matching (the auth seam). Return true to go on, or a
 * gate to go on within its limits; return false once the hook has answered
 * the request itself. The response already carries `X-Flint-Request-Id`.
 */
export type BeforeRoute = (req: Http1Request, res: Http1Response, info: RequestInfo) => boolean | TargetGate | Promise<boolean>;

/** A path the router answers itself; never shadowed by a route. */
export interface RouterEndpoint {
  /** Exact path, no query. */
  path: string;
  /** Public endpoints skip `beforeRoute` (health checks, the login path). */
  public?: boolean;
  handle(req: Http1Request, res: Http1Response, info: RequestInfo): void | Promise<void>;
}

export interface RouterOptions {
  store: Store;
  executor: Executor;
  logger: Logger;
  host: string;
  port: number;
  /** Where the router's metrics go; by default a registry of its own. */
  registry?: Registry;
  beforeRoute?: BeforeRoute;
  /** More router-owned endpoints (e.g. the login path when auth is on). */
  endpoints?: RouterEndpoint[];
  /** How long stop() lets in-flight requests finish. Default 5 s. */
  drainMs?: number;
  /** Caps and timeouts of client connections (install values router.*); no caps and 65/66 s when absent. */
  connections?: Partial<NodeServerLimits> & { onDrop?: (why: ConnectionDrop) => void; acceptSockets?: number };
  /**
   * Pass the caller's `Authorization` header on to functions. Off when the
   * header is the router's own credential (authentication on): a function
   * that saw it could replay it.
   */
  forwardAuthorization?: boolean;
  /** Where one entry per request for a function (or for no route) goes: router.accessLog. */
  accessLog?: AccessLog;
  /** Spans for requests that reach a function (tracing.otlpEndpoint); none when absent. */
  tracer?: Tracer;
}

export const HEALTH_PATH = '/router-healthz';
export const METRICS_PATH = '/metrics';
const FULL_URL_HEADER = 'X-Flint-Full-Url';
/** The internal path as a route template, for spans (`http.route`). */
const INTERNAL_ROUTE = `${INTERNAL_PREFIX}{function}`;
const SCOPED_OWN_ENDPOINT = "Forbidden: a scoped token reaches only its functions, not the router's own endpoints";

/**
 * Splits a request target into path and query (`?...` or ''), accepting the
 * absolute form, whose authority comes third (undefined for the origin form).
 */
function splitTarget(url: string): [string, string, string | undefined] {
  const q = url.indexOf('?');
  let path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q);
  let authority: string | undefined;
  if (path.charCodeAt(0) !== 47 /* / */) {
    const scheme = path.indexOf('://');
    if (scheme > 0) {
      const slash = path.indexOf('/', scheme + 3);
      authority = path.slice(scheme + 3, slash < 0 ? path.length : slash);
      path = slash < 0 ? '/' : path.slice(slash);
    }
  }
  return [path, query, authority];
}

/** Percent-decoded when that gives printable ASCII; otherwise as sent (a header must stay valid). */
function paramValue(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    const v = decodeURIComponent(raw);
    return /^[\x20-\x7e]*$/.test(v) ? v : raw;
  } catch {
    return raw;
  }
}

function forwardPath(hit: RouteHit, path: string, query: string): string {
  switch (hit.entry.forward) {
    case FORWARD_ROOT:
      return `/${query}`;
    case FORWARD_BELOW: {
      const rest = path.slice(hit.matched);
      return rest.charCodeAt(0) === 47 ? rest + query : `/${rest}${query}`;
    }
    default:
      return path + query;
  }
}

export class Router {
  readonly #o: RouterOptions;
  readonly #server: Http1Server;
  readonly #source: RouteSource;
  readonly #upstreams = new Upstreams();
  readonly #tunnels = new Tunnels();
  readonly #deps: ProxyDeps;
  readonly #endpoints = new Map<string, RouterEndpoint>();
  readonly #classes: RequestClasses;
  readonly #tracer: Tracer | undefined;
  readonly metrics: RouterMetrics;
  #url = '';
  #stopping: Promise<void> | undefined = undefined;
  #draining = false;

  constructor(opts: RouterOptions) {
    this.#o = opts;
    this.#tracer = opts.tracer;
    this.#classes = requestClasses({ forwardAuthorization: opts.forwardAuthorization ?? true, tracing: opts.tracer !== undefined });
    this.metrics = new RouterMetrics(opts.registry, () => this.#tunnels.size);
    this.#source = new RouteSource(opts.store, opts.logger);
    this.#deps = { executor: opts.executor, upstreams: this.#upstreams, metrics: this.metrics, logger: opts.logger, tunnels: this.#tunnels, accessLog: opts.accessLog };
    const own: RouterEndpoint[] = [
      { path: HEALTH_PATH, public: true, handle: (req, res, info) => this.#health(req, res, info) },
      // Behind the auth seam like every route (DESIGN section 5 exempts only
      // health and login): the metrics name every function and its traffic.
      { path: METRICS_PATH, handle: (req, res, info) => this.#serveMetrics(req, res, info) },
      ...(opts.endpoints ?? []),
    ];
    for (const e of own) this.#endpoints.set(e.path, e);
    // A load balancer in front usually keeps idle connections for 60 s; ours
    // must outlive them or it would close one just as a request is sent on it.
    const c = opts.connections ?? {};
    this.#server = new Http1Server({
      keepAliveTimeoutMs: c.keepAliveTimeoutMs ?? 65_000,
      headersTimeoutMs: c.headersTimeoutMs ?? 66_000,
      maxConnections: c.maxConnections,
      maxConnectionsPerClient: c.maxConnectionsPerClient,
      acceptSockets: c.acceptSockets,
      onDrop: c.onDrop,
      handle: (req, res) => this.#handle(req, res),
      refuse: (res, err) => this.#refuse(res, err),
      handlerFailed: (err) => opts.logger.error({ err }, 'router request handler failed'),
    });
  }

  get url(): string {
    return this.#url;
  }

  /** Routes (entries) in the current table. */
  get routeCount(): number {
    return this.#source.table.size;
  }

  async start(): Promise<{ url: string }> {
    await this.#source.start();
    const a = await this.#server.listen(this.#o.port, this.#o.host);
    this.#url = `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
    return { url: this.#url };
  }

  /**
   * The first step of a stop behind a load balancer: for `ms`, keeps serving
   * while /router-healthz answers 503 and every answer closes its
   * connection, so clients reconnect through whatever now routes around this
   * router (kube-proxy drops a terminating pod's endpoint at once, but the
   * connections it already made stay with it). stop() follows.
   */
  async leaveRotation(ms: number): Promise<void> {
    this.#draining = true;
    this.#server.lameDuck();
    await new Promise((r) => setTimeout(r, ms));
  }

  /**
   * Stops accepting, lets requests under way finish (up to drainMs), then
   * runs `whileTunnelsOpen` with upgraded connections still carrying bytes
   * (the server stops the function instances there, so their WebSockets
   * close with 1001 rather than being cut), then cuts what is left. A later
   * call waits for the first one's stop.
   */
  stop(whileTunnelsOpen?: () => Promise<void>): Promise<void> {
    this.#stopping ??= this.#stop(whileTunnelsOpen);
    return this.#stopping;
  }

  async #stop(whileTunnelsOpen?: () => Promise<void>): Promise<void> {
    this.#source.stop();
    const listening = this.#server.listening;
    if (listening) await this.#server.drain(this.#o.drainMs ?? 5000);
    try {
      if (whileTunnelsOpen !== undefined) await whileTunnelsOpen();
    } finally {
      // The listening socket does not close while any connection it accepted is open, upgraded ones included.
      this.#tunnels.closeAll();
      if (listening) await this.#server.closed();
      await this.#upstreams.close();
    }
  }

  // ---- per request ----------------------------------------------------------------

  #handle(req: Http1Request, res: Http1Response): void {
    const startedMs = performance.now();
    const scan = scanRequest(req.rawHeaders, this.#classes);
    const requestId = requestIdFrom(scan.requestId);
    const [path, query, authority] = splitTarget(req.url ?? '/');
    // RFC 9112 3.2.2: an absolute-form target's authority wins over Host, for matching and for what the function is told.
    if (authority !== undefined) scan.host = authority;
    const own = this.#endpoints.get(path);
    if (own?.public) {
      this.#serveOwn(own, req, res, { requestId, method: req.method as string, path });
      return;
    }
    const hook = this.#o.beforeRoute;
    if (hook !== undefined) {
      const info: RequestInfo = { requestId, method: req.method as string, path };
      res.setHeader(REQUEST_ID_HEADER, requestId);
      let go: boolean | TargetGate | Promise<boolean>;
      try {
        go = hook(req, res, info);
      } catch (err) {
        this.#hookFailed(res, requestId, err);
        return;
      }
      if (go === false) {
        this.#access(req, res.statusCode, requestId, startedMs);
        return;
      }
      if (go !== true) {
        if (go instanceof Promise) {
          go.then(
            (ok) => {
              if (ok) this.#afterHook(own, req, res, scan, requestId, path, query, startedMs, undefined);
              else this.#access(req, res.statusCode, requestId, startedMs);
            },
            (err) => this.#hookFailed(res, requestId, err),
          );
        } else {
          this.#afterHook(own, req, res, scan, requestId, path, query, startedMs, go);
        }
        return;
      }
    }
    this.#afterHook(own, req, res, scan, requestId, path, query, startedMs, undefined);
  }

  #afterHook(
    own: RouterEndpoint | undefined,
    req: Http1Request,
    res: Http1Response,
    scan: ScannedRequest,
    requestId: string,
    path: string,
    query: string,
    startedMs: number,
    gate: TargetGate | undefined,
  ): void {
    if (own === undefined) this.#route(req, res, scan, requestId, path, query, startedMs, gate);
    else if (gate !== undefined) this.#miss(req, sendError(res, 'FLINT_ERR_FORBIDDEN', SCOPED_OWN_ENDPOINT, requestId), requestId, startedMs);
    else this.#serveOwn(own, req, res, { requestId, method: req.method as string, path });
  }

  /** Why the gate keeps this request from `backend` (every function a weighted route may draw); undefined when it does not. */
  #refusal(gate: TargetGate, method: string, backend: Backend): string | undefined {
    if (backend instanceof FnTarget) return gate.refusal(method, backend.key);
    for (const t of backend.targets) {
      const why = gate.refusal(method, t.key);
      if (why !== undefined) return backend.targets.length > 1 ? `${why} (this route may send the request to any of its functions)` : why;
    }
    return undefined;
  }

  #route(
    req: Http1Request,
    res: Http1Response,
    scan: ScannedRequest,
    requestId: string,
    path: string,
    query: string,
    startedMs: number,
    gate: TargetGate | undefined,
  ): void {
    const method = req.method as string;
    const table = this.#source.table;
    const headers = scan.headers;
    const tracer = this.#tracer;
    const matchStartMs = tracer === undefined ? 0 : performance.now();
    let target: FnTarget;
    let fwd: string;
    let route: string;
    if (path.startsWith(INTERNAL_PREFIX)) {
      const hit = resolveInternal(path, table.functions);
      if (hit === undefined) {
        this.#miss(req, sendError(res, 'FLINT_ERR_NOT_FOUND', `no function at ${path.slice(0, 256)}`, requestId), requestId, startedMs);
        return;
      }
      target = hit.target;
      if (gate !== undefined) {
        const why = gate.refusal(method, target.key);
        if (why !== undefined) {
          this.#miss(req, sendError(res, 'FLINT_ERR_FORBIDDEN', why, requestId), requestId, startedMs);
          return;
        }
      }
      fwd = hit.forwardPath + query;
      route = INTERNAL_ROUTE;
    } else {
      const m = table.match(scan.host, path, method);
      if (path === '/' && (method === 'GET' || method === 'HEAD') && (m === undefined || 'allow' in m)) {
        // Ingress controllers and load balancers probe the root (GKE's ingress must get a 200 there), as Fission's router allows.
        sendEmpty(res, 200, requestId);
        this.#miss(req, 200, requestId, startedMs);
        return;
      }
      if (m === undefined) {
        this.#miss(req, sendError(res, 'FLINT_ERR_NOT_FOUND', `no route for ${method} ${path.slice(0, 256)}`, requestId), requestId, startedMs);
        return;
      }
      if ('allow' in m) {
        const msg = `method ${method} is not allowed on ${path.slice(0, 256)}`;
        this.#miss(req, sendError(res, 'FLINT_ERR_METHOD_NOT_ALLOWED', msg, requestId, m.allow), requestId, startedMs);
        return;
      }
      if (gate !== undefined) {
        const why = this.#refusal(gate, method, m.entry.backend);
        if (why !== undefined) {
          this.#miss(req, sendError(res, 'FLINT_ERR_FORBIDDEN', why, requestId), requestId, startedMs);
          return;
        }
      }
      target = pickTarget(m.entry.backend);
      fwd = forwardPath(m, path, query);
      route = m.entry.template.source;
      if (m.params !== undefined) {
        const names = m.entry.template.params;
        const headerNames = m.entry.paramHeaders;
        for (let i = 0; i < names.length; i++) headers.push(headerNames[i], paramValue(m.params[names[i]]));
      }
    }
    headers.push(REQUEST_ID_HEADER, requestId, FULL_URL_HEADER, path + query);
    const remote = req.socket.remoteAddress;
    if (remote !== undefined) headers.push('X-Forwarded-For', scan.forwardedFor === undefined ? remote : `${scan.forwardedFor}, ${remote}`);
    else if (scan.forwardedFor !== undefined) headers.push('X-Forwarded-For', scan.forwardedFor);
    if (!scan.forwarded && scan.host !== '') headers.push('X-Forwarded-Host', scan.host, 'Forwarded', forwardedHost(scan.host));
    const trace = tracer === undefined ? undefined : new RequestTrace(tracer, scan.traceparent, startedMs, matchStartMs, method, route, path, target, requestId, headers);
    new ProxyCall(this.#deps, req, res, target, requestId, fwd, headers, scan.hasBody, startedMs, trace).start();
  }

  /** A request the server refused before routing (malformed, head too large, too slow). */
  #refuse(res: Http1Response, err: FlintError): void {
    this.#countMiss('other', sendError(res, err.code, err.message, requestIdFrom(undefined)));
  }

  #countMiss(method: string, status: number): void {
    this.metrics.count(this.metrics.none, method, status);
  }

  /** A request that reached no function: counted, and in the access log. */
  #miss(req: Http1Request, status: number, requestId: string, startedMs: number): void {
    this.#countMiss(req.method as string, status);
    this.#access(req, status, requestId, startedMs);
  }

  #access(req: Http1Request, status: number, requestId: string, startedMs: number): void {
    this.#o.accessLog?.(accessEntry(req, status, requestId, startedMs, null, null));
  }

  #hookFailed(res: Http1Response, requestId: string, err: unknown): void {
    this.#o.logger.error({ err, requestId }, 'beforeRoute hook failed');
    sendError(res, 'FLINT_ERR_INTERNAL', 'the request could not be checked', requestId);
  }

  #serveOwn(e: RouterEndpoint, req: Http1Request, res: Http1Response, info: RequestInfo): void {
    try {
      const done = e.handle(req, res, info);
      if (done !== undefined) done.catch((err) => this.#ownFailed(e, res, info, err));
    } catch (err) {
      this.#ownFailed(e, res, info, err);
    }
  }

  #ownFailed(e: RouterEndpoint, res: Http1Response, info: RequestInfo, err: unknown): void {
    this.#o.logger.error({ err, path: e.path, requestId: info.requestId }, 'router endpoint failed');
    sendError(res, 'FLINT_ERR_INTERNAL', `${e.path} failed`, info.requestId);
  }

  #health(req: Http1Request, res: Http1Response, info: RequestInfo): void {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendError(res, 'FLINT_ERR_METHOD_NOT_ALLOWED', `method ${req.method} is not allowed on ${info.path}`, info.requestId, 'GET, HEAD');
      return;
    }
    if (this.#draining) sendError(res, 'FLINT_ERR_UNAVAILABLE', 'the router is stopping', info.requestId);
    else sendEmpty(res, 200, info.requestId);
  }

  async #serveMetrics(req: Http1Request, res: Http1Response, info: RequestInfo): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendError(res, 'FLINT_ERR_METHOD_NOT_ALLOWED', `method ${req.method} is not allowed on ${info.path}`, info.requestId, 'GET, HEAD');
      return;
    }
    const text = await this.metrics.registry.metrics();
    res.writeHead(200, ['Content-Type', this.metrics.registry.contentType, REQUEST_ID_HEADER, info.requestId]);
    res.end(text);
  }
}

export function createRouter(opts: RouterOptions): Router {
  return new Router(opts);
}
