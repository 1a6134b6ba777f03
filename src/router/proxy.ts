// Forwarding one request to a function instance: lease an instance, send the
// request over the instance's keep-alive pool, stream both bodies, give the
// instance back with what happened to it.
//
// One ProxyCall object per request is the undici dispatch handler itself, so
// there are no per-request closures; the ServerResponse points back at it
// through a symbol for the 'close' and 'drain' listeners, which are shared
// module-level functions.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { type ErrorCode, ErrorCodes, isFlintError } from '../api/errors.ts';
import type { Executor, Lease } from '../executor/types.ts';
import { responseHeaders } from './forward-headers.ts';
import type { FnStats, RouterMetrics } from './metrics.ts';
import { REQUEST_ID_HEADER, sendError } from './reply.ts';
import type { FnTarget } from './targets.ts';
import type { Upstreams } from './upstreams.ts';

export interface ProxyDeps {
  executor: Executor;
  upstreams: Upstreams;
  metrics: RouterMetrics;
  logger: Logger;
}

/** nginx's code for "the client went away first"; only ever seen in metrics. */
const CLIENT_CLOSED = 499;

const kCall = Symbol('flint.proxyCall');
type WithCall = ServerResponse & { [kCall]?: ProxyCall };

function onResponseClose(this: WithCall): void {
  const call = this[kCall];
  if (call !== undefined) call.clientClosed();
}

function onResponseDrain(this: WithCall): void {
  this[kCall]?.resumeUpstream();
}

/** Errors that mean the instance did not hold up its end of the connection. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOENT',
  'ECONNRESET',
  'EPIPE',
  'ENOTCONN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'UND_ERR_RES_EXCEEDED_MAX_SIZE',
]);

/** Errors caused by what the client sent, not by the function. */
const CLIENT_ERROR_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH', 'UND_ERR_NOT_SUPPORTED']);

export class ProxyCall implements Dispatcher.DispatchHandler {
  readonly #deps: ProxyDeps;
  readonly #req: IncomingMessage;
  readonly #res: WithCall;
  readonly #target: FnTarget;
  readonly #stats: FnStats;
  readonly #requestId: string;
  readonly #opts: Dispatcher.DispatchOptions;
  readonly #startedMs: number;
  readonly #abort = new AbortController();
  #lease: Lease | undefined = undefined;
  #abortUpstream: ((err?: Error) => void) | undefined = undefined;
  #resume: (() => void) | undefined = undefined;
  #gone = false;
  #done = false;

  constructor(
    deps: ProxyDeps,
    req: IncomingMessage,
    res: ServerResponse,
    target: FnTarget,
    requestId: string,
    path: string,
    headers: string[],
    hasBody: boolean,
    startedMs: number,
  ) {
    this.#deps = deps;
    this.#req = req;
    this.#res = res;
    this.#target = target;
    this.#stats = deps.metrics.statsFor(target);
    this.#requestId = requestId;
    this.#startedMs = startedMs;
    this.#opts = {
      path,
      method: req.method as Dispatcher.HttpMethod,
      headers,
      body: hasBody ? req : null,
      // functionTimeout bounds the wait for the response head and any silence
      // inside the body; a body that keeps flowing may run longer.
      headersTimeout: target.timeoutMs,
      bodyTimeout: target.timeoutMs,
    };
  }

  start(): void {
    this.#deps.metrics.begin();
    this.#res[kCall] = this;
    this.#res.on('close', onResponseClose);
    this.#deps.executor.acquire(this.#target.fn, this.#abort.signal).then(
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
    pool.dispatch(this.#opts, this);
  }

  #onAcquireError(err: unknown): void {
    if (this.#gone) {
      this.#finish(CLIENT_CLOSED);
      return;
    }
    if (isFlintError(err)) {
      if (err.status >= 500) this.#deps.logger.warn({ fn: this.#target.key, code: err.code, requestId: this.#requestId, err: err.message }, 'no instance');
      this.#fail(err.code, err.message);
      return;
    }
    this.#deps.logger.error({ fn: this.#target.key, err, requestId: this.#requestId }, 'executor failed');
    this.#fail('FLINT_ERR_INTERNAL', `could not get an instance of function '${this.#target.name}'`);
  }

  /** The client closed its connection before the response was complete. */
  clientClosed(): void {
    if (this.#done || this.#res.writableFinished) return;
    this.#gone = true;
    this.#abort.abort();
    this.#abortUpstream?.(new Error('client closed the connection'));
  }

  resumeUpstream(): void {
    this.#resume?.();
  }

  // ---- undici dispatch handler ------------------------------------------------

  onConnect(abort: (err?: Error) => void): void {
    this.#abortUpstream = abort;
    if (this.#gone) abort(new Error('client closed the connection'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    // 1xx interim responses are the router's business with its own client, not forwarded.
    if (statusCode < 200) return true;
    this.#resume = resume;
    // The standard reason phrase, as Go's proxy does: a custom one is rarely meant for the end client.
    this.#res.writeHead(statusCode, responseHeaders(rawHeaders, REQUEST_ID_HEADER, this.#requestId));
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.#res.write(chunk)) return true;
    this.#res.once('drain', onResponseDrain);
    return false;
  }

  onComplete(): void {
    this.#lease?.release('ok');
    this.#res.end();
    this.#finish(this.#res.statusCode);
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
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      lease?.release('timeout');
      this.#fail('FLINT_ERR_FUNCTION_TIMEOUT', `function '${name}' did not answer within its timeout of ${this.#target.timeoutMs / 1000} s`);
      return;
    }
    if (CLIENT_ERROR_CODES.has(code)) {
      lease?.release('ok');
      this.#fail('FLINT_ERR_VALIDATION', `the request cannot be forwarded: ${err.message}`);
      return;
    }
    if (!UNREACHABLE_CODES.has(code) && !code.startsWith('HPE_')) {
      this.#deps.logger.warn({ fn: this.#target.key, err, requestId: this.#requestId }, 'unexpected proxy error');
    }
    lease?.release('unreachable');
    if (lease !== undefined) this.#deps.upstreams.forgetIfGone(lease);
    this.#fail('FLINT_ERR_FUNCTION_UNREACHABLE', `function '${name}' is unreachable: its instance failed the connection (${code || err.message})`);
  }

  // ---- endings ----------------------------------------------------------------

  #fail(code: ErrorCode, message: string): void {
    const status = ErrorCodes[code].status;
    if (status >= 500) this.#deps.logger.debug({ fn: this.#target.key, code, requestId: this.#requestId }, message);
    sendError(this.#res, code, message, this.#requestId);
    this.#finish(status);
  }

  #finish(status: number): void {
    if (this.#done) return;
    this.#done = true;
    this.#deps.metrics.end(this.#stats, this.#opts.method, status, this.#startedMs);
  }
}
