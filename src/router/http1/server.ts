// The router's HTTP/1.1 server, on node:net.
//
// A departure from DESIGN section 7 (router on node:http), made on a
// measured reason: a prototype proxy on node:net served 1.6-1.9x the
// requests per second of the same proxy on node:http under wrk and added
// 30-70 µs less per request at one connection; in `npm run bench` the
// router's throughput went from 0.41x of a bare node:http server to
// 0.57-0.62x, its added latency p50 from 209 µs to 148-198 µs
// (bench/RESULTS.md, 2026-11-23 third section). node:http builds a
// stream-based request and response per request and schedules several
// ticks for each; the router needs neither: it forwards bytes. This server
// does only what the router needs: HTTP/1.0 and 1.1, keep-alive, pipelined
// requests served in turn, chunked and Content-Length bodies both ways,
// Expect: 100-continue, and handing a connection over once a response
// switches protocols (Upgrade, for WebSockets). No HTTP/2.
import net from 'node:net';
import type { FlintError } from '../../api/errors.ts';
import { ConnectionAdmission, type ConnectionDrop, type ConnectionLimits } from '../../limits/connection-admission.ts';
import { closeGroup, listenGroup } from '../../limits/listener-group.ts';
import { noteLoopWork } from '../../limits/loop-turn.ts';
import { ClientConnection, type ConnectionHost } from './connection.ts';
import type { Http1Request } from './request.ts';
import type { Http1Response } from './response.ts';

export interface Http1ServerOptions extends Partial<ConnectionLimits> {
  /** A connection the caps closed (connection-limits.ts says which and why). */
  onDrop?(why: ConnectionDrop): void;
  /** Idle time after which a keep-alive connection is closed. */
  keepAliveTimeoutMs: number;
  /** The longest a request head may take to arrive (slow-header attacks). */
  headersTimeoutMs: number;
  /** Listening sockets in one SO_REUSEPORT group (limits/listener-group.ts); 1 when absent. */
  acceptSockets?: number;
  /** Must not throw; an exception is reported to handlerFailed and the connection answered or cut. */
  handle(req: Http1Request, res: Http1Response): void;
  /** Writes the error answer for a request the server refused. */
  refuse(res: Http1Response, err: FlintError): void;
  handlerFailed(err: unknown): void;
}

/** How often idle connections and slow heads are looked for. */
const SWEEP_MS = 1000;

export class Http1Server implements ConnectionHost {
  readonly #o: Http1ServerOptions;
  /** The first listening socket; the rest of its SO_REUSEPORT group (limits/listener-group.ts) in #more. */
  readonly #server: net.Server;
  #more: readonly net.Server[] = [];
  readonly #onSocket: (socket: net.Socket) => void;
  /** Oldest first (a Set keeps insertion order): the caps close the oldest idle one. */
  readonly #conns = new Set<ClientConnection>();
  readonly #admission: ConnectionAdmission<ClientConnection>;
  readonly keepAliveLine: string;
  #sweep: NodeJS.Timeout | undefined = undefined;
  #closing = false;
  #lameDuck = false;
  #allClosed: (() => void) | undefined = undefined;
  #stopped: Promise<void> | undefined = undefined;

  constructor(opts: Http1ServerOptions) {
    this.#o = opts;
    this.keepAliveLine = `Keep-Alive: timeout=${Math.floor(opts.keepAliveTimeoutMs / 1000)}\r\n`;
    // Not half-open: a client that shuts its sending side has gone, as node:http
    // also takes it; the socket ends and the request under way is cancelled.
    this.#admission = new ConnectionAdmission(
      { maxConnections: opts.maxConnections ?? 0, maxConnectionsPerClient: opts.maxConnectionsPerClient ?? 0 },
      opts.onDrop,
    );
    this.#onSocket = (socket) => {
      noteLoopWork();
      if (!this.#admission.admit(socket.remoteAddress ?? '', this.#conns, this.#evict)) {
        // Nothing is read from it: a refused connection costs its fd for as long as a close takes.
        socket.on('error', noop);
        socket.destroy();
        return;
      }
      const conn = new ClientConnection(socket, this);
      this.#conns.add(conn);
      this.#admission.opened(conn);
    };
    this.#server = net.createServer({ noDelay: true, allowHalfOpen: false }, this.#onSocket);
  }

  get closing(): boolean {
    return this.#closing || this.#lameDuck;
  }

  /**
   * Keeps accepting and answering, but every answer from now on closes its
   * connection: a client (or a proxy) that sent it comes back on a new
   * connection, which a load balancer that has taken this server out of
   * rotation sends elsewhere. Idle connections are left open: closing one
   * could cross a request the client is sending on it.
   */
  lameDuck(): void {
    this.#lameDuck = true;
  }

  get listening(): boolean {
    return this.#server.listening;
  }

  /** Open client connections. */
  get connections(): number {
    return this.#conns.size;
  }

  async listen(port: number, host: string): Promise<net.AddressInfo> {
    // Node's default backlog (511) drops the SYNs of a burst of new clients (a load balancer
    // reconnecting, wrk's 2,000 at once), which then retry after a second: the accept queue
    // may hold up to the connection cap (the kernel still caps it at net.core.somaxconn).
    const backlog = Math.max(511, this.#o.maxConnections || 4096);
    const group = await listenGroup(this.#server, { port, host, backlog, sockets: this.#o.acceptSockets ?? 1 }, this.#onSocket);
    this.#more = group.more;
    this.#sweep = setInterval(() => this.#sweepConnections(), SWEEP_MS);
    this.#sweep.unref();
    return group.address;
  }

  /**
   * Stops accepting connections, closes idle ones, lets requests under way
   * finish (each response closes its connection) and cuts what is left after
   * `drainMs`. Resolves once the HTTP connections are gone; connections
   * handed over after an upgrade are the caller's, and `closed` waits for
   * them as well.
   */
  async drain(drainMs: number): Promise<void> {
    if (this.#stopped !== undefined) return;
    this.#closing = true;
    clearInterval(this.#sweep);
    this.#stopped = closeGroup([this.#server, ...this.#more]);
    for (const c of [...this.#conns]) c.closeIfIdle();
    if (this.#conns.size > 0) {
      const drained = new Promise<void>((resolve) => {
        this.#allClosed = resolve;
      });
      const force = setTimeout(() => {
        for (const c of [...this.#conns]) c.destroy();
      }, drainMs);
      await drained;
      clearTimeout(force);
    }
  }

  /** Settles when the listening socket has closed: every connection it accepted is gone. */
  async closed(): Promise<void> {
    await this.#stopped;
  }

  /** drain(), then closed(). */
  async close(drainMs: number): Promise<void> {
    await this.drain(drainMs);
    await this.closed();
  }

  // ---- ConnectionHost ---------------------------------------------------------------

  handle(req: Http1Request, res: Http1Response): void {
    noteLoopWork();
    this.#o.handle(req, res);
  }

  refuse(res: Http1Response, err: FlintError): void {
    this.#o.refuse(res, err);
  }

  handlerFailed(err: unknown): void {
    this.#o.handlerFailed(err);
  }

  readonly #evict = (victim: ClientConnection): void => {
    victim.destroy();
    this.forget(victim);
  };

  forget(conn: ClientConnection): void {
    if (!this.#conns.delete(conn)) return;
    this.#admission.closed(conn);
    if (this.#conns.size === 0 && this.#allClosed !== undefined) {
      const done = this.#allClosed;
      this.#allClosed = undefined;
      done();
    }
  }

  #sweepConnections(): void {
    const now = Date.now();
    const idleBefore = now - this.#o.keepAliveTimeoutMs;
    const headBefore = now - this.#o.headersTimeoutMs;
    for (const c of this.#conns) {
      // Closing, and the client has not taken the last bytes in all that time.
      if (c.ending) {
        if (c.idleSince < idleBefore) c.destroy();
      } else if (c.headSince !== 0 && c.headSince < headBefore) c.timeOutHead();
      else if (c.idleSince !== 0 && c.idleSince < idleBefore) c.closeIfIdle();
    }
  }
}

function noop(): void {}
