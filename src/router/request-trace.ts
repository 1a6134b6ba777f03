// One routed request's spans, made only when tracing is on: the router's
// server span (a child of the caller's `traceparent`, or a new trace), and
// below it `route match`, `acquire` (warm or cold) and `function call`,
// whose context is the `traceparent` the function receives. A request that
// reaches no function gets no spans (the metrics and access log count it).
import type { Lease } from '../executor/types.ts';
import { SPAN_KIND, type Span, type Tracer } from '../tracing/types.ts';
import type { FnTarget } from './targets.ts';

/** nginx's code for "the client went away first", as the proxy counts it. */
const CLIENT_CLOSED = 499;

export class RequestTrace {
  readonly #tracer: Tracer;
  readonly #server: Span;
  readonly #target: FnTarget;
  /** The forwarded headers, and where the `traceparent` value sits in them. */
  readonly #headers: string[];
  readonly #at: number;
  #acquire: Span | undefined = undefined;
  #call: Span | undefined = undefined;

  /**
   * Starts the spans of a request whose route named `target`: `startedMs`
   * when the request arrived, `matchStartMs` when route matching began (after
   * the auth seam); the match ends now. Appends `traceparent` to `headers`.
   */
  constructor(
    tracer: Tracer,
    traceparent: string | undefined,
    startedMs: number,
    matchStartMs: number,
    method: string,
    route: string,
    path: string,
    target: FnTarget,
    requestId: string,
    headers: string[],
  ) {
    this.#tracer = tracer;
    this.#target = target;
    const server = tracer.startSpan(`${method} ${route}`, SPAN_KIND.server, tracer.extract(traceparent), startedMs);
    this.#server = server;
    if (server.recording) {
      server
        .set('http.request.method', method)
        .set('http.route', route)
        .set('url.path', path)
        .set('flint.request_id', requestId)
        .set('flint.function.name', target.name)
        .set('flint.function.namespace', target.namespace);
      tracer.startSpan('route match', SPAN_KIND.internal, server.context, matchStartMs).set('http.route', route).end();
    }
    headers.push('traceparent', server.traceparent());
    this.#headers = headers;
    this.#at = headers.length - 1;
  }

  /** The router asks the executor for an instance. */
  acquireStart(): void {
    if (!this.#server.recording) return;
    this.#acquire?.end();
    this.#acquire = this.#tracer.startSpan('acquire', SPAN_KIND.internal, this.#server.context).set('flint.function.name', this.#target.name);
  }

  /** The executor leased an instance; the request is sent to it now. */
  leased(lease: Lease): void {
    if (!this.#server.recording) return;
    const a = this.#acquire;
    if (a !== undefined) {
      a.set('flint.cold_start', lease.coldStart).set('flint.instance.id', lease.instanceId).end();
      this.#acquire = undefined;
    }
    // A call that never reached its instance is retried on another: its span ends here.
    this.#call?.fail('the instance was unreachable; sent to another').end();
    const call = this.#tracer.startSpan('function call', SPAN_KIND.client, this.#server.context);
    call.set('flint.function.name', this.#target.name).set('flint.instance.id', lease.instanceId).set('flint.cold_start', lease.coldStart);
    this.#call = call;
    this.#headers[this.#at] = call.traceparent();
  }

  /** The request is over: `status` is what the client got (499 when it went away first). */
  finish(status: number, why?: string): void {
    const server = this.#server;
    if (!server.recording) return;
    this.#acquire?.fail(why ?? (status === CLIENT_CLOSED ? 'the client closed the connection' : 'no instance')).end();
    const call = this.#call;
    if (call !== undefined) {
      call.set('http.response.status_code', status);
      if (status >= 500) call.fail(why ?? `status ${status}`);
      call.end();
    }
    server.set('http.response.status_code', status);
    if (status >= 500) server.fail(why ?? `status ${status}`);
    server.end();
  }
}
