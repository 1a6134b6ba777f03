// What a handler receives: `context.request` (the request with its body read
// and parsed), `context.response` (the raw ServerResponse, for streaming) and
// `context.log`.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';

export type Query = Record<string, string | string[]>;

export class FlintRequest {
  readonly method: string;
  /** Path and query exactly as received. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** Parsed by content-type: JSON value, string (text/*, urlencoded), Buffer, or undefined when empty. */
  readonly body: unknown;
  readonly rawBody: Buffer;
  /** The underlying request; its body stream has been consumed already. */
  readonly raw: IncomingMessage;
  #query: Query | undefined;

  constructor(req: IncomingMessage, body: unknown, rawBody: Buffer) {
    this.method = req.method ?? 'GET';
    this.url = req.url ?? '/';
    this.headers = req.headers;
    this.body = body;
    this.rawBody = rawBody;
    this.raw = req;
  }

  // Path and query are derived on first use: most handlers read neither.
  get path(): string {
    const q = this.url.indexOf('?');
    return q === -1 ? this.url : this.url.slice(0, q);
  }

  get query(): Query {
    if (this.#query === undefined) {
      const q = this.url.indexOf('?');
      this.#query = q === -1 ? {} : parseQuery(this.url.slice(q + 1));
    }
    return this.#query;
  }

  /** A header by case-insensitive name, as Express's `req.get`. */
  get(name: string): string | string[] | undefined {
    return this.headers[name.toLowerCase()];
  }
}

function parseQuery(search: string): Query {
  const grouped = new Map<string, string | string[]>();
  for (const [k, v] of new URLSearchParams(search)) {
    const prev = grouped.get(k);
    if (prev === undefined) grouped.set(k, v);
    else if (Array.isArray(prev)) prev.push(v);
    else grouped.set(k, [prev, v]);
  }
  // fromEntries defines own properties, so a key like __proto__ stays data.
  return Object.fromEntries(grouped);
}

export interface Context {
  request: FlintRequest;
  response: ServerResponse;
  log: Console;
}

export function createContext(req: IncomingMessage, res: ServerResponse, body: unknown, rawBody: Buffer): Context {
  return { request: new FlintRequest(req, body, rawBody), response: res, log: console };
}
