// One client connection of the router's HTTP/1.1 server: requests one after
// another (pipelined ones wait their turn), each body streamed with
// backpressure, each response written in as few writes as it can be.
import type net from 'node:net';
import { FlintError } from '../../api/errors.ts';
import { type RequestHead, RequestParser, type RequestSink } from './request-parser.ts';
import { Http1Request, RequestBody } from './request.ts';
import { type DetachedSocket, Http1Response, type ResponseOwner } from './response.ts';

export interface ConnectionHost {
  /** The `Keep-Alive` response header line, built once by the server. */
  readonly keepAliveLine: string;
  /** The server is stopping: every response closes its connection. */
  readonly closing: boolean;
  handle(req: Http1Request, res: Http1Response): void;
  /** Answers a request the parser refused (or a handler that threw before answering). */
  refuse(res: Http1Response, err: FlintError): void;
  handlerFailed(err: unknown): void;
  forget(conn: ClientConnection): void;
}

/** Requests sent ahead of their turn are buffered up to this much before reading stops. */
const MAX_QUEUED_BYTES = 64 * 1024;
/** A body left unread by its answer is read and dropped up to this much; past it the connection is closed. */
const MAX_DUMP_BYTES = 256 * 1024;
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';

export class ClientConnection implements RequestSink, ResponseOwner {
  readonly #socket: net.Socket;
  readonly #host: ConnectionHost;
  readonly #parser: RequestParser;
  #res: Http1Response | undefined = undefined;
  #body: RequestBody | null = null;
  #bodyDone = true;
  /** The response went out before the body came in: the rest of the body is read and dropped. */
  #dumping = false;
  #dumped = 0;
  #closeAfter = false;
  /** end() has been called on the socket: no further request is read or answered. */
  #ending = false;
  #corked = false;
  /** Reading stopped for a body that is not being read, or for requests queued behind this one. */
  #paused = false;
  #waitingDrain = false;
  #closed = false;
  /** When the connection last became idle (ms), 0 while a request is under way. */
  idleSince: number;
  /** When the current head began arriving (ms), 0 when none is. */
  headSince = 0;
  /** The client's address, for the per-client connection cap. */
  readonly clientAddress: string;

  constructor(socket: net.Socket, host: ConnectionHost) {
    this.#socket = socket;
    this.clientAddress = socket.remoteAddress ?? '';
    this.#host = host;
    this.#parser = new RequestParser(this);
    this.idleSince = Date.now();
    socket.on('data', this.#onData);
    socket.on('error', noop);
    socket.on('close', this.#onClose);
    socket.on('drain', this.#onDrain);
  }

  get idle(): boolean {
    return this.#res === undefined && !this.#parser.midRequest;
  }

  /** A request is being answered: the connection is not closed to make room for another. */
  get answering(): boolean {
    return this.#res !== undefined;
  }

  get ending(): boolean {
    return this.#ending;
  }

  // ---- reading ------------------------------------------------------------------

  readonly #onData = (data: Buffer): void => {
    // Closing: nothing after the current request is read.
    if (this.#ending && this.#bodyDone) return;
    if (this.#res === undefined && this.headSince === 0) this.headSince = Date.now();
    try {
      this.#parser.execute(data);
    } catch (err) {
      this.#refuse(err);
      return;
    }
    if (this.#res === undefined) {
      // A head (perhaps pipelined behind a request answered during this read) is still arriving.
      if (this.#parser.buffered === 0) this.headSince = 0;
      else if (this.headSince === 0) this.headSince = Date.now();
    } else if (this.#bodyDone && this.#parser.buffered > MAX_QUEUED_BYTES) this.#pause();
  };

  onRequest(head: RequestHead): void {
    this.headSince = 0;
    this.idleSince = 0;
    if (!head.keepAlive) this.#closeAfter = true;
    if (head.upgrade !== undefined) {
      // What follows the head is the other protocol's, or nothing: if the
      // answer does not switch, the connection ends with it.
      this.#closeAfter = true;
      this.#pause();
    }
    const res = new Http1Response(this, head.method === 'HEAD', head.http10, this.#host.keepAliveLine);
    this.#res = res;
    let body: RequestBody | null = null;
    if (head.hasBody) {
      body = new RequestBody(this.#bodyWanted);
      this.#bodyDone = false;
      if (head.expectContinue) this.write(CONTINUE, false);
    } else {
      this.#bodyDone = true;
    }
    this.#body = body;
    this.#dumping = false;
    const req = new Http1Request(head, this.#socket, body);
    try {
      this.#host.handle(req, res);
    } catch (err) {
      this.#host.handlerFailed(err);
      if (!res.headersSent) this.#host.refuse(res, new FlintError('FLINT_ERR_INTERNAL', 'the router failed on this request'));
      else this.destroy();
    }
  }

  onBody(chunk: Buffer, _last: boolean): boolean {
    if (this.#dumping) {
      this.#dumped += chunk.length;
      if (this.#dumped > MAX_DUMP_BYTES && !this.#ending) this.#end();
      return true;
    }
    if (this.#body === null) return true;
    if (this.#body.push(chunk)) return true;
    this.#pause();
    return false;
  }

  onRequestEnd(): void {
    this.#bodyDone = true;
    if (!this.#dumping) this.#body?.push(null);
    if (this.#res?.finished === true && !this.#ending) this.#next();
  }

  readonly #bodyWanted = (): void => {
    if (this.#paused && !this.#bodyDone) this.#resume();
  };

  #pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.#socket.pause();
  }

  #resume(): void {
    this.#paused = false;
    this.#socket.resume();
    // Bytes held back when reading stopped are parsed now, not when more arrive.
    if (this.#parser.buffered > 0) {
      try {
        this.#parser.execute(EMPTY);
      } catch (err) {
        this.#refuse(err);
      }
    }
  }

  readonly #onClose = (): void => {
    this.#closed = true;
    const res = this.#res;
    if (res !== undefined && !res.finished) res.watcher?.clientClosed();
    if (!this.#bodyDone && this.#body !== null && !this.#dumping) {
      this.#body.destroy(Object.assign(new Error('the client closed the connection before sending the whole body'), { code: 'ECONNRESET' }));
    }
    this.#host.forget(this);
  };

  // ---- writing (ResponseOwner) -------------------------------------------------------

  get closeAfter(): boolean {
    return this.#closeAfter || this.#host.closing;
  }

  write(data: Buffer | string, more: boolean): boolean {
    const s = this.#socket;
    if (this.#closed) return true;
    if (more && !this.#corked) {
      s.cork();
      this.#corked = true;
    }
    const ok = typeof data === 'string' ? s.write(data, 'latin1') : s.write(data);
    if (!more && this.#corked) {
      this.#corked = false;
      s.uncork();
    }
    if (!ok) this.#waitingDrain = true;
    return ok;
  }

  readonly #onDrain = (): void => {
    if (!this.#waitingDrain) return;
    this.#waitingDrain = false;
    this.#res?.watcher?.drained();
  };

  responseDone(res: Http1Response, close: boolean): void {
    if (res !== this.#res) return;
    if (close || this.#closeAfter || this.#host.closing) {
      this.#end();
      return;
    }
    if (this.#bodyDone) {
      this.#next();
      return;
    }
    // Read the rest of the body and drop it, so the next request can be parsed.
    this.#dumping = true;
    this.#dumped = 0;
    this.#body?.destroy();
    if (this.#paused) this.#resume();
  }

  destroy(): void {
    this.#socket.destroy();
  }

  /** The response switched protocols: the socket, paused, and the bytes read past the head leave this server. */
  detach(): DetachedSocket {
    const socket = this.#socket;
    socket.pause();
    socket.off('data', this.#onData);
    socket.off('close', this.#onClose);
    socket.off('drain', this.#onDrain);
    if (this.#corked) socket.uncork();
    this.#corked = false;
    this.#closed = true;
    this.#res = undefined;
    this.#host.forget(this);
    return { socket, rest: this.#parser.takeRest() };
  }

  /**
   * No more requests: what is written goes out, then the socket is destroyed
   * (the client may never close its side); the rest of a body still arriving
   * is dropped. The server's sweep cuts it if the client never reads.
   */
  #end(): void {
    if (this.#ending) return;
    this.#ending = true;
    this.#closeAfter = true;
    this.#dumping = true;
    this.idleSince = Date.now();
    this.#socket.once('finish', () => this.#socket.destroy());
    this.#socket.end();
  }

  #next(): void {
    this.#res = undefined;
    this.#body = null;
    this.#dumping = false;
    this.idleSince = Date.now();
    // A head already (partly) here from pipelining starts its clock now.
    if (this.#parser.buffered > 0) this.headSince = this.idleSince;
    if (this.#paused) {
      this.#paused = false;
      this.#socket.resume();
    }
    try {
      this.#parser.next();
    } catch (err) {
      this.#refuse(err);
    }
  }

  /** Ends an idle connection (keep-alive timeout, server stop); one mid-request is left alone. */
  closeIfIdle(): boolean {
    if (!this.idle) return false;
    this.#socket.destroy();
    return true;
  }

  /** The head took too long: answered with 408 when no response is under way. */
  timeOutHead(): void {
    if (this.#res !== undefined) return;
    this.#refuse(new FlintError('FLINT_ERR_REQUEST_TIMEOUT', 'the request head took too long to arrive'));
  }

  #refuse(err: unknown): void {
    const e = err instanceof FlintError ? err : new FlintError('FLINT_ERR_VALIDATION', `malformed HTTP request: ${(err as Error).message}`);
    this.#socket.pause();
    this.#paused = true;
    const pending = this.#res;
    if (pending !== undefined) {
      // Mid-request, once the answer has begun, there is no clean answer left to give.
      if (pending.headersSent) {
        this.destroy();
        return;
      }
      // A bad chunk in a body being forwarded, before the function answered:
      // the handler is told the client is gone (so the instance's request is
      // cut), whatever it still writes is dropped, and the client gets the 400.
      const watcher = pending.watcher;
      pending.abandon();
      watcher?.clientClosed();
      if (!this.#bodyDone && this.#body !== null) this.#body.destroy(Object.assign(new Error(e.message), { code: e.code }));
      this.#bodyDone = true;
    }
    // A refused request ends the connection: what follows it cannot be trusted to be a request.
    this.#closeAfter = true;
    this.#dumping = true;
    const res = new Http1Response(this, false, false, this.#host.keepAliveLine);
    this.#res = res;
    this.#host.refuse(res, e);
  }
}

const EMPTY = Buffer.alloc(0);

function noop(): void {}
