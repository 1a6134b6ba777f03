// Forwarding one request to a function instance: lease an instance, send the
// request over the instance's keep-alive pool, stream both bodies, give the
// instance back with what happened to it.
//
// One ProxyCall object per request is the worker client's handler and the
// response's watcher itself, so there are no per-request closures.
import type net from 'node:net';
import type { Logger } from 'pino';
import { type ErrorCode, ErrorCodes, isFlintError } from '../api/errors.ts';
import type { Executor, Lease } from '../executor/types.ts';
import { type AccessLog, accessEntry } from './access-log.ts';
import { endToEndHeaders, switchHeaders } from './forward-headers.ts';
import type { Http1Request } from './http1/request.ts';
import { type DetachedSocket, HeaderLines, type Http1Response, type ResponseWatcher } from './http1/response.ts';
import type { FnStats, RouterMetrics } from './metrics.ts';
import { REQUEST_ID_HEADER, sendError } from './reply.ts';
import type { RequestTrace } from './request-trace.ts';
import { type FnTarget, isStream } from './targets.ts';
import { Tunnel, type Tunnels } from './tunnel.ts';
import type { Upstreams } from './upstreams.ts';
import { badResponse, UpstreamError } from './worker-client/errors.ts';
import type { ResponseHandler, UpstreamRequest } from './worker-client/types.ts';

export interface ProxyDeps {
  executor: Executor;
  upstreams: Upstreams;
  metrics: RouterMetrics;
  logger: Logger;
  /** Upgraded connections open now; the router cuts them when it stops. */
  tunnels: Tunnels;
  /** Set when router.accessLog is on. */
  accessLog?: AccessLog;
}

/** nginx's code for "the client went away first"; only ever seen in metrics. */
const CLIENT_CLOSED = 499;

/**
 * A request that never reached its instance (the connection to it could not be made) is sent to another one, up to
 * this many times, as Fission's router retries dial errors. Its body too: a new connection reads none of it before
 * it is up (worker-client/connection.ts).
 */
const MAX_DIAL_RETRIES = 3;

/**
 * A Unix-socket connect to an instance whose accept queue is full fails at once with EAGAIN (TCP would retry the
 * SYN): the instance is busy with a burst of new connections, not broken. The request tries again shortly, on it or
 * another instance, without condemning it; after this many tries (about a second) the caller is told to come back.
 */
const BUSY_RETRY_MS = 10;
const MAX_BUSY_RETRIES = 100;

/** Connection errors that mean the instance is gone, not merely misbehaving: no warning logged. */
const EXPECTED_CODES = new Set(['ECONNREFUSED', 'ENOENT', 'ECONNRESET', 'EPIPE', 'ENOTCONN', 'ETIMEDOUT', 'EHOSTUNREACH', 'UPSTREAM_CLOSED', 'UPSTREAM_DESTROYED']);

/**
 * The client's head lines for a function's response headers, made once per
 * list: the worker client's parser gives every response that repeats a head
 * the same frozen list.
 */
const linesByHeaders = new WeakMap<readonly string[], HeaderLines>();

function clientLines(headers: readonly string[]): HeaderLines {
  let lines = linesByHeaders.get(headers);
  if (lines === undefined) {
    lines = new HeaderLines(endToEndHeaders(headers));
    // Only a remembered head's list (frozen) comes again.
    if (Object.isFrozen(headers)) linesByHeaders.set(headers, lines);
  }
  return lines;
}

export class ProxyCall implements ResponseHandler, ResponseWatcher {
  readonly #deps: ProxyDeps;
  readonly #req: Http1Request;
  readonly #res: Http1Response;
  readonly #target: FnTarget;
  readonly #stats: FnStats;
  readonly #requestId: string;
  readonly #opts: UpstreamRequest;
  readonly #startedMs: number;
  /** Made only when the request has to wait for an instance. */
  #abort: AbortController | undefined = undefined;
  #lease: Lease | undefined = undefined;
  #abortUpstream: ((err: Error) => void) | undefined = undefined;
  #resume: (() => void) | undefined = undefined;
  #gone = false;
  #done = false;
  #tail: Buffer | undefined = undefined;
  /** The response is a stream the function's streaming limits apply to. */
  #streaming = false;
  /** Ends a stream at the function's streaming.maxDurationSeconds. */
  #maxTimer: NodeJS.Timeout | undefined = undefined;
  #dialRetries = 0;
  #busyRetries = 0;
  /** The request's spans; undefined with tracing off. */
  readonly #trace: RequestTrace | undefined;

  constructor(
    deps: ProxyDeps,
    req: Http1Request,
    res: Http1Response,
    target: FnTarget,
    requestId: string,
    path: string,
    headers: string[],
    hasBody: boolean,
    startedMs: number,
    trace?: RequestTrace,
  ) {
    this.#deps = deps;
    this.#trace = trace;
    this.#req = req;
    this.#res = res;
    this.#target = target;
    this.#stats = deps.metrics.statsFor(target);
    this.#requestId = requestId;
    this.#startedMs = startedMs;
    this.#opts = {
      path,
      method: req.method as string,
      headers,
      fixed: target.headers,
      body: hasBody ? req.body : null,
      // functionTimeout bounds the wait for the response head and any silence
      // inside the body; a body that keeps flowing may run longer.
      timeoutMs: target.timeoutMs,
      upgrade: req.upgrade,
    };
  }

  start(): void {
    this.#deps.metrics.begin();
    this.#res.watcher = this;
    this.#acquire();
  }

  #acquire(): void {
    this.#trace?.acquireStart();
    const executor = this.#deps.executor;
    const ready = executor.tryAcquire(this.#target.fn);
    if (ready !== undefined) {
      this.#onLease(ready);
      return;
    }
    this.#abort = new AbortController();
    executor.acquire(this.#target.fn, this.#abort.signal).then(
      (lease) => this.#onLease(lease),
      (err) => this.#onAcquireError(err),
    );
  }

  #onLease(lease: Lease): void {
    if (this.#gone) {
      lease.release('ok');
      this.#finish(CLIENT_CLOSED);
      return;
    }
    this.#lease = lease;
    if (lease.coldStart) this.#stats.coldStarts++;
    const pool = this.#deps.upstreams.poolFor(lease);
    if (pool === undefined) {
      lease.release('ok');
      this.#fail('FLINT_ERR_INTERNAL', `the executor gave function '${this.#target.name}' an instance without an address`);
      return;
    }
    this.#trace?.leased(lease);
    pool.dispatch(this.#opts, this);
  }

  #onAcquireError(err: unknown): void {
    if (this.#gone) {
      this.#finish(CLIENT_CLOSED);
      return;
    }
    if (isFlintError(err)) {
      if (err.status >= 500) this.#deps.logger.warn({ fn: this.#target.key, code: err.code, requestId: this.#requestId, err: err.message }, 'no instance');
      this.#fail(err.code, err.message, err.retryAfterSeconds);
      return;
    }
    this.#deps.logger.error({ fn: this.#target.key, err, requestId: this.#requestId }, 'executor failed');
    this.#fail('FLINT_ERR_INTERNAL', `could not get an instance of function '${this.#target.name}'`);
  }

  /** The client closed its connection before the response was complete. */
  clientClosed(): void {
    if (this.#done || this.#res.finished) return;
    this.#gone = true;
    this.#abort?.abort();
    this.#abortUpstream?.(new Error('client closed the connection'));
  }

  /** The client took what was written: read on from the instance. */
  drained(): void {
    if (!this.#done) this.#resume?.();
  }

  // ---- worker client handler ---------------------------------------------------

  onStart(abort: (err: Error) => void): void {
    this.#abortUpstream = abort;
    if (this.#gone) abort(new Error('client closed the connection'));
  }

  onHeaders(statusCode: number, headers: readonly string[], resume: () => void): number | undefined {
    this.#resume = resume;
    const target = this.#target;
    if (target.streamKind !== undefined && isStream(target.streamKind, headers)) this.#streaming = true;
    try {
      // The standard reason phrase, as Go's proxy does: a custom one is rarely meant for the end client.
      this.#res.writeHeadWith(statusCode, clientLines(headers), REQUEST_ID_HEADER, this.#requestId);
    } catch (err) {
      // Header names and values that are not HTTP are refused (ERR_INVALID_HTTP_TOKEN, ERR_INVALID_CHAR).
      this.#abortUpstream?.(badResponse((err as Error).message));
      return undefined;
    }
    if (!this.#streaming) return undefined;
    const maxMs = target.streamMaxMs;
    if (maxMs > 0) {
      this.#maxTimer = setTimeout(() => this.#abortUpstream?.(new UpstreamError('UPSTREAM_STREAM_LIMIT', `the stream reached its maximum duration of ${maxMs / 1000} s`)), maxMs);
      this.#maxTimer.unref();
    }
    return target.streamIdleMs > 0 ? target.streamIdleMs : undefined;
  }

  onData(chunk: Buffer, last: boolean): boolean {
    if (last) {
      // Written with the end: a write() before end() costs node:http a cork and an extra tick.
      this.#tail = chunk;
      return true;
    }
    return this.#res.write(chunk);
  }

  onComplete(): void {
    this.#lease?.release('ok');
    this.#res.end(this.#tail);
    this.#finish(this.#res.statusCode);
  }

  onUpgrade(headers: readonly string[], upstream: net.Socket, rest: Buffer): void {
    const lease = this.#lease;
    if (this.#gone || this.#req.socket.destroyed) {
      upstream.destroy();
      lease?.release('ok');
      this.#finish(CLIENT_CLOSED);
      return;
    }
    const out = switchHeaders(headers, REQUEST_ID_HEADER, this.#requestId);
    let client: DetachedSocket;
    try {
      if (out === undefined) throw new Error('a 101 without an Upgrade header');
      client = this.#res.switchProtocols(out);
    } catch (err) {
      upstream.destroy();
      this.onError(badResponse((err as Error).message));
      return;
    }
    // The instance stays leased while the connection is open: it is busy, not idle, and must not be reaped.
    const tunnels = this.#deps.tunnels;
    const target = this.#target;
    const limits =
      target.tunnelIdleMs > 0 || target.tunnelMaxMs > 0
        ? { idleMs: target.tunnelIdleMs, maxMs: target.tunnelMaxMs, websocket: this.#req.upgrade?.toLowerCase() === 'websocket', onLimit: (why: string) => this.#deps.logger.info({ fn: target.key, requestId: this.#requestId }, `upgraded connection closed: ${why}`) }
        : undefined;
    const tunnel = new Tunnel(
      client.socket,
      client.rest,
      upstream,
      rest,
      (t, outcome) => {
        tunnels.delete(t);
        lease?.release(outcome);
        if (outcome === 'unreachable' && lease !== undefined) this.#deps.upstreams.forgetIfGone(lease);
      },
      limits,
    );
    tunnels.add(tunnel);
    if (!tunnel.closed) lease?.markLongLived?.();
    this.#finish(101);
  }

  onError(err: Error): void {
    const lease = this.#lease;
    if (this.#gone || this.#req.socket.destroyed) {
      this.#gone = true;
      lease?.release('ok');
      this.#res.destroy();
      this.#finish(CLIENT_CLOSED);
      return;
    }
    const code = (err as { code?: string }).code ?? '';
    const name = this.#target.name;
    if (this.#streaming && (code === 'UPSTREAM_STREAM_LIMIT' || code === 'UPSTREAM_BODY_TIMEOUT')) {
      // A stream that ran its course: the instance is fine. Its head has gone out, so the client sees the body cut short;
      // the status it got is what the metrics count.
      this.#deps.logger.info({ fn: this.#target.key, requestId: this.#requestId }, `stream closed: ${err.message}`);
      lease?.release('ok');
      this.#res.destroy();
      this.#finish(this.#res.statusCode);
      return;
    }
    if (code === 'UPSTREAM_HEADERS_TIMEOUT' || code === 'UPSTREAM_BODY_TIMEOUT') {
      lease?.release('timeout');
      this.#fail('FLINT_ERR_FUNCTION_TIMEOUT', `function '${name}' did not answer within its timeout of ${this.#target.timeoutMs / 1000} s`);
      return;
    }
    if (code === 'UPSTREAM_BAD_REQUEST') {
      lease?.release('ok');
      this.#fail('FLINT_ERR_VALIDATION', `the request cannot be forwarded: ${err.message}`);
      return;
    }
    if (code === 'EAGAIN' && (err as { syscall?: string }).syscall === 'connect') {
      lease?.release('ok');
      if (this.#busyRetries++ < MAX_BUSY_RETRIES) {
        this.#tryAgain(BUSY_RETRY_MS);
        return;
      }
      this.#fail('FLINT_ERR_TOO_MANY_REQUESTS', `function '${name}' is not taking new connections: its instances' accept queues stayed full for ${(MAX_BUSY_RETRIES * BUSY_RETRY_MS) / 1000} s`, 1);
      return;
    }
    if (!EXPECTED_CODES.has(code)) {
      this.#deps.logger.warn({ fn: this.#target.key, err, requestId: this.#requestId }, 'unexpected proxy error');
    }
    lease?.release('unreachable');
    if (lease !== undefined) this.#deps.upstreams.forgetIfGone(lease);
    // Node marks a failed connect with syscall 'connect'; nothing of the request left the router.
    if ((err as { syscall?: string }).syscall === 'connect' && this.#dialRetries < MAX_DIAL_RETRIES) {
      this.#dialRetries++;
      this.#deps.logger.debug({ fn: this.#target.key, requestId: this.#requestId, code }, 'instance unreachable before the request was sent; trying another');
      this.#tryAgain(0);
      return;
    }
    const why = code === 'UPSTREAM_BAD_RESPONSE' ? err.message : `its instance failed the connection (${code || err.message})`;
    this.#fail('FLINT_ERR_FUNCTION_UNREACHABLE', `function '${name}' is unreachable: ${why}`);
  }

  /** Nothing of the request reached the instance (its lease is given back): asks for an instance again, after `delayMs`. */
  #tryAgain(delayMs: number): void {
    this.#lease = undefined;
    this.#abortUpstream = undefined;
    if (delayMs === 0) this.#acquire();
    else setTimeout(() => this.#acquire(), delayMs);
  }

  // ---- endings ----------------------------------------------------------------

  #fail(code: ErrorCode, message: string, retryAfterSeconds?: number): void {
    const status = ErrorCodes[code].status;
    if (status >= 500) this.#deps.logger.debug({ fn: this.#target.key, code, requestId: this.#requestId }, message);
    sendError(this.#res, code, message, this.#requestId, undefined, retryAfterSeconds);
    this.#finish(status, message);
  }

  /** `why`: the router's own error message, when it answered for the function. */
  #finish(status: number, why?: string): void {
    if (this.#done) return;
    this.#done = true;
    if (this.#maxTimer !== undefined) clearTimeout(this.#maxTimer);
    // A drain or close after the end must not reach this call (nor resume the instance connection for its next request).
    if (this.#res.watcher === this) this.#res.watcher = undefined;
    this.#deps.metrics.end(this.#stats, this.#opts.method, status, this.#startedMs);
    this.#trace?.finish(status, why);
    this.#deps.accessLog?.(accessEntry(this.#req, status, this.#requestId, this.#startedMs, this.#target.key, this.#lease?.instanceId ?? null));
  }
}
