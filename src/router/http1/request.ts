// One request on a client connection of the router's HTTP/1.1 server. Its
// fields follow node:http's IncomingMessage where the router and the auth
// guard read them (method, url, rawHeaders, headers, socket, on()); the body
// is a Readable of its own, made only for requests that have one.
import type net from 'node:net';
import { Readable } from 'node:stream';
import type { RequestHead } from './request-parser.ts';

/** A request body; reading from it is what lets the connection read more from the client. */
export class RequestBody extends Readable {
  readonly #wanted: () => void;

  constructor(wanted: () => void) {
    super({ highWaterMark: 64 * 1024 });
    this.#wanted = wanted;
  }

  override _read(): void {
    this.#wanted();
  }

  // A client that goes away mid-upload destroys the body with an error; as in
  // node:http, that error is only raised to someone listening for it, else it
  // would be an uncaught exception (a body nobody has started reading yet).
  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    cb(this.listenerCount('error') > 0 ? err : null);
  }
}

/** As node:http: repeats of these are dropped, not joined (a joined Host or Authorization means nothing). */
const FIRST_ONLY = new Set(['authorization', 'content-length', 'content-type', 'host', 'user-agent', 'referer', 'from', 'age', 'etag', 'expires', 'location']);

function noop(): void {}

export class Http1Request {
  readonly method: string;
  readonly url: string;
  readonly httpVersion: string;
  readonly rawHeaders: readonly string[];
  readonly socket: net.Socket;
  /** The protocol asked for with `Upgrade` (see RequestHead.upgrade); the response may switch to it. */
  readonly upgrade: string | undefined;
  /** null when the request has no body. */
  readonly body: RequestBody | null;
  #headers: Record<string, string> | undefined = undefined;
  #empty: RequestBody | undefined = undefined;

  constructor(head: RequestHead, socket: net.Socket, body: RequestBody | null) {
    this.method = head.method;
    this.url = head.url;
    this.httpVersion = head.http10 ? '1.0' : '1.1';
    this.rawHeaders = head.rawHeaders;
    this.socket = socket;
    this.upgrade = head.upgrade;
    this.body = body;
  }

  /** Lower-cased names; repeated headers joined as RFC 9110 5.3 allows (cookies with '; '), some kept first only. */
  get headers(): Record<string, string> {
    if (this.#headers !== undefined) return this.#headers;
    const out: Record<string, string> = Object.create(null);
    const raw = this.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      const prev = out[name];
      if (prev === undefined) out[name] = raw[i + 1];
      else if (!FIRST_ONLY.has(name)) out[name] = `${prev}${name === 'cookie' ? '; ' : ', '}${raw[i + 1]}`;
    }
    this.#headers = out;
    return out;
  }

  /** The body's events ('data', 'end', 'error'), as on an IncomingMessage; a request without a body just ends. */
  on(event: string, listener: (...args: never[]) => void): this {
    let body = this.body ?? this.#empty;
    if (body === undefined) {
      body = new RequestBody(noop);
      body.push(null);
      this.#empty = body;
    }
    body.on(event, listener as (...args: unknown[]) => void);
    return this;
  }
}
