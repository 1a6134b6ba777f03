// One keep-alive connection to a function instance, carrying one request at
// a time. Everything per request happens on objects made once per
// connection (parser, listeners, timer), which is most of why this client
// is cheaper per request than a general-purpose one.
import type net from 'node:net';
import type { Readable } from 'node:stream';
import { badResponse, UpstreamError } from './errors.ts';
import { ResponseParser, type ResponseSink } from './response-parser.ts';
import type { RequestHead } from './request-head.ts';
import type { ResponseHandler, UpstreamRequest } from './types.ts';

/** What a connection needs from its pool. */
export interface ConnectionOwner {
  /** The request is done and the connection can carry another. */
  release(conn: Connection): void;
  /** The connection is closed; forget it. */
  remove(conn: Connection): void;
}

/** A keep-alive hint this close to running out is not worth the race with the instance's close. */
const HINT_MARGIN_MS = 1000;
const EMPTY = Buffer.alloc(0);

function noop(): void {}

export class Connection implements ResponseSink {
  readonly #socket: net.Socket;
  readonly #owner: ConnectionOwner;
  readonly #maxIdleMs: number;
  readonly #parser: ResponseParser;
  #handler: ResponseHandler | undefined = undefined;
  #timer: NodeJS.Timeout | undefined = undefined;
  #timerMs = 0;
  #awaitingHead = false;
  /** Set by the parser's onEnd; acted on once the current read has been parsed. */
  #ended = false;
  #body: Readable | null = null;
  #bodyChunked = false;
  #bodySent = true;
  #closed = false;
  #idleDeadline = 0;
  /** The handler asked to stop reading and has not resumed yet. */
  #pushedBack = false;
  /** Set by the parser's onUpgrade: the 101's headers, acted on once the current read has been parsed. */
  #switched: readonly string[] | undefined = undefined;

  constructor(socket: net.Socket, owner: ConnectionOwner, maxIdleMs: number) {
    this.#socket = socket;
    this.#owner = owner;
    this.#maxIdleMs = maxIdleMs;
    this.#parser = new ResponseParser(this);
    socket.on('data', this.#onSocketData);
    socket.on('end', this.#onSocketEnd);
    socket.on('error', this.#onSocketError);
    socket.on('close', this.#onSocketClose);
  }

  /** Whether an idle connection may still be used at `now` (ms since the epoch). */
  usable(now: number): boolean {
    return !this.#closed && now < this.#idleDeadline;
  }

  /** `head` from requestHead(), which has already checked `req`. */
  send(req: UpstreamRequest, head: RequestHead, handler: ResponseHandler): void {
    this.#handler = handler;
    this.#bodyChunked = head.chunked;
    this.#ended = false;
    this.#pushedBack = false;
    this.#awaitingHead = true;
    this.#parser.start(req.method === 'HEAD', req.upgrade !== undefined);
    this.#armTimer(req.timeoutMs);
    this.#socket.write(head.text, 'latin1');
    const body = req.body;
    this.#bodySent = body === null;
    if (body !== null) {
      // A connection still being made may fail: the body stays unread until it is up, so the caller can send the
      // whole request to another instance (a failed connect is all it needs to know nothing reached this one).
      if (this.#socket.connecting) {
        this.#socket.once('connect', () => {
          if (this.#handler === handler) this.#attachBody(body);
        });
      } else this.#attachBody(body);
    }
    handler.onStart(this.#abort);
  }

  #attachBody(body: Readable): void {
    this.#body = body;
    body.on('data', this.#onBodyData);
    body.on('end', this.#onBodyEnd);
    body.on('error', this.#onBodyError);
  }

  /** Close at once; a request in flight ends with `err`. */
  destroy(err?: Error): void {
    if (this.#handler !== undefined) this.#fail(err ?? new UpstreamError('UPSTREAM_DESTROYED', 'the connection to the instance was closed'));
    else this.#close();
  }

  #armTimer(ms: number): void {
    if (ms <= 0) {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#timerMs = 0;
      return;
    }
    // A pool serves one instance, so one function and one timeout: refresh() is the usual case.
    if (this.#timer !== undefined && this.#timerMs === ms) {
      this.#timer.refresh();
      return;
    }
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(this.#onTimeout, ms);
    this.#timer.unref();
    this.#timerMs = ms;
  }

  readonly #onTimeout = (): void => {
    if (this.#handler === undefined) return;
    // The client is still sending the request body and the instance is taking it:
    // the function's time has not started to run out (undici's rule too).
    if (this.#awaitingHead && !this.#bodySent && !this.#socket.writableNeedDrain) {
      this.#timer?.refresh();
      return;
    }
    // Quiet because the router paused reading for a slow client: not the instance's fault.
    if (this.#socket.isPaused() && !this.#awaitingHead) {
      this.#timer?.refresh();
      return;
    }
    const s = this.#timerMs / 1000;
    this.#fail(
      this.#awaitingHead
        ? new UpstreamError('UPSTREAM_HEADERS_TIMEOUT', `no response head within ${s} s`)
        : new UpstreamError('UPSTREAM_BODY_TIMEOUT', `the response body stalled for ${s} s`),
    );
  };

  // ---- response (ResponseSink) --------------------------------------------------

  onHead(status: number, headers: readonly string[]): void {
    this.#awaitingHead = false;
    const bodyTimeoutMs = this.#handler?.onHeaders(status, headers, this.#resume);
    if (bodyTimeoutMs !== undefined && bodyTimeoutMs !== this.#timerMs && this.#handler !== undefined) this.#armTimer(bodyTimeoutMs);
  }

  onBody(chunk: Buffer, last: boolean): boolean {
    const h = this.#handler;
    if (h === undefined || h.onData(chunk, last)) return true;
    // Stop at once: the parser holds the rest of this read until resume.
    this.#pushedBack = true;
    this.#socket.pause();
    return false;
  }

  onEnd(): void {
    this.#ended = true;
  }

  onUpgrade(headers: readonly string[]): void {
    this.#switched = headers;
  }

  readonly #resume = (): void => {
    if (this.#closed || this.#handler === undefined || !this.#pushedBack) return;
    this.#pushedBack = false;
    if (this.#parser.holding) {
      this.#parse(EMPTY);
      // Completed (which resumes reading itself), or pushed back again on the held bytes.
      if (this.#handler === undefined || this.#pushedBack) return;
    }
    this.#socket.resume();
  };

  #complete(): void {
    const h = this.#handler;
    if (h === undefined) return;
    this.#handler = undefined;
    this.#ended = false;
    const bodyInFlight = !this.#bodySent;
    this.#detachBody();
    this.#bodySent = true;
    // Backpressure was for this response only; an idle connection must read to notice a close.
    if (this.#socket.isPaused()) this.#socket.resume();
    if (this.#parser.keepAlive && !bodyInFlight && !this.#closed) {
      const hint = this.#parser.keepAliveHintMs;
      const idleMs = hint === undefined ? this.#maxIdleMs : Math.min(this.#maxIdleMs, hint - HINT_MARGIN_MS);
      this.#idleDeadline = Date.now() + idleMs;
      this.#owner.release(this);
    } else {
      // The instance answered before it had the whole request, or will not keep the connection.
      this.#close();
    }
    h.onComplete();
  }

  /** After a 101 the socket carries another protocol: it leaves the pool for the handler. */
  #handOver(headers: readonly string[]): void {
    const h = this.#handler;
    if (h === undefined) return;
    this.#handler = undefined;
    this.#switched = undefined;
    const socket = this.#socket;
    socket.pause();
    socket.off('data', this.#onSocketData);
    socket.off('end', this.#onSocketEnd);
    socket.off('close', this.#onSocketClose);
    socket.off('error', this.#onSocketError);
    socket.on('error', noop);
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#owner.remove(this);
    const rest = this.#parser.takeRest();
    if (h.onUpgrade === undefined) {
      socket.destroy();
      h.onError(badResponse('101 Switching Protocols to a caller that cannot take the connection'));
      return;
    }
    h.onUpgrade(headers, socket, rest);
  }

  #fail(err: Error): void {
    const h = this.#handler;
    if (h === undefined) return;
    this.#handler = undefined;
    this.#detachBody();
    this.#close();
    h.onError(err);
  }

  readonly #abort = (err: Error): void => {
    this.#fail(err);
  };

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#socket.destroy();
    this.#owner.remove(this);
  }

  // ---- socket -----------------------------------------------------------------

  readonly #onSocketData = (chunk: Buffer): void => {
    if (this.#handler === undefined) {
      // An idle connection has nothing to say; if it does, it cannot be trusted with the next request.
      this.#close();
      return;
    }
    if (this.#timer !== undefined) this.#timer.refresh();
    this.#parse(chunk);
  };

  #parse(chunk: Buffer): void {
    try {
      this.#parser.execute(chunk);
    } catch (err) {
      this.#fail(err as Error);
      return;
    }
    // Completing after the whole read is parsed: bytes after the response make the parser refuse reuse.
    if (this.#ended) this.#complete();
    else if (this.#switched !== undefined) this.#handOver(this.#switched);
  }

  readonly #onSocketEnd = (): void => {
    if (this.#handler !== undefined && this.#parser.finishOnClose()) {
      this.#parser.keepAlive = false;
      this.#complete();
      return;
    }
    this.destroy(new UpstreamError('UPSTREAM_CLOSED', 'the instance closed the connection before the response was complete'));
  };

  readonly #onSocketError = (err: Error): void => {
    this.destroy(err);
  };

  readonly #onSocketClose = (): void => {
    this.destroy(new UpstreamError('UPSTREAM_CLOSED', 'the instance closed the connection before the response was complete'));
  };

  // ---- request body -----------------------------------------------------------

  readonly #onBodyData = (chunk: Buffer): void => {
    const s = this.#socket;
    this.#timer?.refresh();
    let ok: boolean;
    if (this.#bodyChunked) {
      if (chunk.length === 0) return;
      s.cork();
      s.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
      s.write(chunk);
      ok = s.write('\r\n', 'latin1');
      s.uncork();
    } else {
      ok = s.write(chunk);
    }
    if (!ok) {
      this.#body?.pause();
      s.once('drain', this.#onSocketDrain);
    }
  };

  readonly #onSocketDrain = (): void => {
    this.#body?.resume();
  };

  readonly #onBodyEnd = (): void => {
    if (this.#bodyChunked) this.#socket.write('0\r\n\r\n', 'latin1');
    this.#bodySent = true;
    this.#detachBody();
  };

  readonly #onBodyError = (err: Error): void => {
    this.#fail(err);
  };

  #detachBody(): void {
    const body = this.#body;
    if (body === null) return;
    this.#body = null;
    body.off('data', this.#onBodyData);
    body.off('end', this.#onBodyEnd);
    body.off('error', this.#onBodyError);
    this.#socket.off('drain', this.#onSocketDrain);
    // The rest of a body the instance did not wait for is read and dropped, so the client's connection is not stuck.
    if (!this.#bodySent) body.resume();
  }
}
