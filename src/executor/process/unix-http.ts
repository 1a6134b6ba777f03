// Control calls to a worker over its Unix socket (health probe, specialize):
// a kept-alive channel per worker, and a one-off request for tests and tools.
// The data path uses the router's pooled client.
import http from 'node:http';
import { Client, type Dispatcher } from 'undici';
import { WORKER_IDLE_KEEPALIVE_MS } from '../types.ts';

export interface UnixReply {
  status: number;
  text: string;
}

export function unixRequest(
  socketPath: string,
  method: string,
  urlPath: string,
  opts: { body?: unknown; timeoutMs: number; signal?: AbortSignal },
): Promise<UnixReply> {
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const done = <T>(fn: (v: T) => void) => (v: T) => {
      clearTimeout(timer);
      fn(v);
    };
    resolve = done(resolve);
    reject = done(reject);
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const headers: http.OutgoingHttpHeaders = payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) };
    const req = http.request({ socketPath, method, path: urlPath, headers, agent: false, signal: opts.signal }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        // Control answers are small; anything huge is cut, not buffered.
        if (size < 64 * 1024) chunks.push(c);
        size += c.length;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    // A deadline for the whole exchange, not just socket inactivity.
    timer = setTimeout(() => req.destroy(new TimeoutError(`no answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    req.on('error', reject);
    req.end(payload);
  });
}

export class TimeoutError extends Error {}

/**
 * A kept-alive connection to one worker for its control calls. The health
 * probe that finds the worker ready leaves the connection open, so the
 * specialization, which a cold start waits for, does not pay for a connect.
 */

export class ControlChannel {
  readonly #client: Client;

  constructor(socketPath: string) {
    this.#client = new Client('http://localhost', { socketPath, pipelining: 1, headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: WORKER_IDLE_KEEPALIVE_MS });
  }

  async request(method: string, urlPath: string, opts: { body?: unknown; timeoutMs: number }): Promise<UnixReply> {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    try {
      const res = await this.#client.request({
        method: method as Dispatcher.HttpMethod,
        path: urlPath,
        headers: payload === undefined ? {} : { 'content-type': 'application/json' },
        body: payload,
        signal: AbortSignal.timeout(opts.timeoutMs),
      });
      return { status: res.statusCode, text: await res.body.text() };
    } catch (err) {
      if ((err as Error)?.name === 'TimeoutError') throw new TimeoutError(`no answer within ${opts.timeoutMs} ms`);
      throw err;
    }
  }

  close(): void {
    void this.#client.destroy().catch(() => {});
  }
}
