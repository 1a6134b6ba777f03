// The CLI's HTTP client, on node:http. A command makes one or two requests,
// and loading fetch (undici) for them costs about 30 ms at start-up, more
// than the rest of the CLI together; node:http costs a few.
import type * as Http from 'node:http';
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import { createRequire } from 'node:module';
import type { Readable } from 'node:stream';

// Not import(): the ESM face of node:http reads every export, and one of them loads undici.
const require = createRequire(import.meta.url);

export interface HttpRequest {
  method: string;
  headers?: Record<string, string>;
  /** A stream is piped as it is read (archives); its errors fail the request. */
  body?: string | Uint8Array | Readable;
  /** Gives up, with an error named TimeoutError, when the answer (body included) takes longer. */
  timeoutMs?: number;
}

export interface HttpResponse {
  readonly status: number;
  readonly ok: boolean;
  header(name: string): string | undefined;
  text(): Promise<string>;
  json(): Promise<unknown>;
  bytes(): Promise<Buffer>;
  /** The body as it arrives (`fn log --follow`). */
  chunks(): AsyncIterable<Buffer>;
}

/** A request that got no answer: `code` is the system's (ECONNREFUSED, ENOTFOUND, ...), or TimeoutError. */
export class HttpFailure extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = code === 'TimeoutError' ? 'TimeoutError' : 'HttpFailure';
    this.code = code;
  }
}

function failure(err: unknown): HttpFailure {
  if (err instanceof HttpFailure) return err;
  const e = err as { code?: string; message?: string };
  return new HttpFailure(e.code ?? 'EIO', e.message ?? String(err));
}

export async function httpRequest(url: string, req: HttpRequest): Promise<HttpResponse> {
  const u = new URL(url);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new HttpFailure('EPROTO', `unsupported URL scheme '${u.protocol}' in ${url}: use http or https`);
  const { request } = require(u.protocol === 'https:' ? 'node:https' : 'node:http') as typeof Http;
  const options: RequestOptions = { method: req.method, headers: { ...req.headers } };
  if (typeof req.body === 'string' || req.body instanceof Uint8Array) {
    (options.headers as Record<string, string | number>)['content-length'] = Buffer.byteLength(req.body);
  }
  return new Promise<HttpResponse>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let response: IncomingMessage | undefined;
    const fail = (err: unknown) => {
      if (timer) clearTimeout(timer);
      if (!settled) {
        settled = true;
        reject(failure(err));
      }
    };
    const cr: ClientRequest = request(u, options, (res) => {
      response = res;
      settled = true;
      resolve(wrap(res, () => timer && clearTimeout(timer)));
    });
    if (req.timeoutMs !== undefined) {
      timer = setTimeout(() => {
        const err = new HttpFailure('TimeoutError', `no answer within ${req.timeoutMs} ms`);
        if (response) response.destroy(err);
        cr.destroy(err);
        fail(err);
      }, req.timeoutMs);
      // The socket keeps the process alive while the answer comes; the deadline alone must not.
      timer.unref();
    }
    cr.on('error', fail);
    const body = req.body;
    if (body === undefined || typeof body === 'string' || body instanceof Uint8Array) {
      cr.end(body);
    } else {
      body.on('error', (err) => {
        cr.destroy(err);
        fail(err);
      });
      body.pipe(cr);
    }
  });
}

function wrap(res: IncomingMessage, done: () => void): HttpResponse {
  res.once('end', done);
  res.once('error', done);
  const bytes = async () => {
    const parts: Buffer[] = [];
    try {
      for await (const c of res) parts.push(c as Buffer);
    } catch (err) {
      throw failure(err);
    }
    return Buffer.concat(parts);
  };
  const status = res.statusCode ?? 0;
  return {
    status,
    ok: status >= 200 && status < 300,
    header: (name) => {
      const v = res.headers[name.toLowerCase()];
      return Array.isArray(v) ? v.join(', ') : v;
    },
    bytes,
    text: async () => (await bytes()).toString('utf8'),
    json: async () => JSON.parse((await bytes()).toString('utf8')),
    chunks: async function* () {
      try {
        for await (const c of res) yield c as Buffer;
      } catch (err) {
        throw failure(err);
      }
    },
  };
}
