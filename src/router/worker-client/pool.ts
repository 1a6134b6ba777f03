// Keep-alive connections to one function instance (a Unix socket in local
// mode, host:port in kubernetes mode), one request per connection at a
// time, as many connections as there are requests in flight.
//
// A departure from DESIGN section 7 (router hot path on undici Pool), made
// on a measured reason: on the 2-core machine the router was the bottleneck
// under load and undici's per-request work (request object and header
// validation, a general parser calling back into JS per header) was the
// largest cost it added over a bare server. With this client a bare proxy
// (src/router/router.bench.ts) served 5-18% more requests per second than
// the same proxy on undici, and the router itself went from well below that
// bare undici proxy to level with a bare proxy on this client (figures in
// bench/RESULTS.md, 2026-11-23 second section). It speaks only what the
// router needs: HTTP/1.1, one request per connection at a time, no
// pipelining; a connection that switches protocols leaves the pool.
import net from 'node:net';
import { Connection, type ConnectionOwner } from './connection.ts';
import { UpstreamError } from './errors.ts';
import { requestHead } from './request-head.ts';
import type { ResponseHandler, UpstreamRequest } from './types.ts';

export type PoolTarget = { socketPath: string } | { host: string; port: number };

export interface PoolOptions {
  /** The longest a connection stays open unused (shorter if the instance hints so). */
  maxIdleMs: number;
  /** How long a TCP connect may take (default 10 s); Unix sockets connect or fail at once. */
  connectTimeoutMs?: number;
}

/** An address that swallows SYNs must give 502 soon, not 504 after the function's timeout. */
const CONNECT_TIMEOUT_MS = 10_000;

function connectTcp(host: string, port: number, timeoutMs: number): net.Socket {
  const socket = net.connect({ host, port, noDelay: true });
  socket.setTimeout(timeoutMs, () => {
    socket.destroy(Object.assign(new Error(`connect to ${host}:${port} timed out`), { code: 'ETIMEDOUT', syscall: 'connect' }));
  });
  socket.once('connect', () => socket.setTimeout(0));
  return socket;
}

export class WorkerPool implements ConnectionOwner {
  readonly #target: PoolTarget;
  readonly #host: string;
  readonly #maxIdleMs: number;
  readonly #connectTimeoutMs: number;
  /** Most recently used last: a warm connection is taken first. */
  readonly #idle: Connection[] = [];
  readonly #all = new Set<Connection>();
  #closing = false;
  #drained: (() => void) | undefined = undefined;

  constructor(target: PoolTarget, opts: PoolOptions) {
    this.#target = target;
    this.#host = 'socketPath' in target ? 'localhost' : target.host.includes(':') ? `[${target.host}]:${target.port}` : `${target.host}:${target.port}`;
    this.#maxIdleMs = opts.maxIdleMs;
    this.#connectTimeoutMs = opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
  }

  /** Open connections, busy or idle. */
  get connections(): number {
    return this.#all.size;
  }

  get idle(): number {
    return this.#idle.length;
  }

  dispatch(req: UpstreamRequest, handler: ResponseHandler): void {
    if (this.#closing) {
      handler.onError(new UpstreamError('UPSTREAM_DESTROYED', 'the connection pool to the instance is closed'));
      return;
    }
    const head = requestHead(req, this.#host);
    if (head instanceof UpstreamError) {
      handler.onError(head);
      return;
    }
    let conn: Connection | undefined;
    if (this.#idle.length > 0) {
      const now = Date.now();
      for (let c = this.#idle.pop(); c !== undefined; c = this.#idle.pop()) {
        if (c.usable(now)) {
          conn = c;
          break;
        }
        c.destroy();
      }
    }
    if (conn === undefined) {
      const t = this.#target;
      const socket = 'socketPath' in t ? net.connect({ path: t.socketPath }) : connectTcp(t.host, t.port, this.#connectTimeoutMs);
      conn = new Connection(socket, this, this.#maxIdleMs);
      this.#all.add(conn);
    }
    conn.send(req, head, handler);
  }

  /** Close idle connections past their time; the router's sweep calls this. */
  closeExpired(): void {
    const now = Date.now();
    for (const conn of [...this.#idle]) if (!conn.usable(now)) conn.destroy();
  }

  /** Stop taking requests, close idle connections, and let the busy ones finish. */
  close(): Promise<void> {
    this.#closing = true;
    for (const conn of [...this.#idle]) conn.destroy();
    if (this.#all.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.#drained = resolve;
    });
  }

  /** Close everything now; requests in flight fail with UPSTREAM_DESTROYED. */
  destroy(): Promise<void> {
    this.#closing = true;
    for (const conn of [...this.#all]) conn.destroy(new UpstreamError('UPSTREAM_DESTROYED', 'the connection pool to the instance was closed'));
    return Promise.resolve();
  }

  // ---- ConnectionOwner ------------------------------------------------------------

  release(conn: Connection): void {
    if (this.#closing) conn.destroy();
    else this.#idle.push(conn);
  }

  remove(conn: Connection): void {
    this.#all.delete(conn);
    const i = this.#idle.lastIndexOf(conn);
    if (i !== -1) this.#idle.splice(i, 1);
    if (this.#closing && this.#all.size === 0 && this.#drained !== undefined) {
      const done = this.#drained;
      this.#drained = undefined;
      done();
    }
  }
}
