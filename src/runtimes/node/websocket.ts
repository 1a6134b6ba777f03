// A server-side WebSocket over the socket an HTTP upgrade handed over: the
// commonly used part of the `ws` library's WebSocket (events, send, ping,
// pong, close, terminate, readyState), so functions written for Fission's
// Node environment run unchanged. No extension is negotiated, so frames
// carry no compression.
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import {
  CLOSE_ABNORMAL,
  CLOSE_NO_STATUS,
  frameHeader,
  isValidCloseCode,
  MAX_CLOSE_REASON,
  MAX_CONTROL_PAYLOAD,
  OP_BINARY,
  OP_CLOSE,
  OP_CONTINUATION,
  OP_PING,
  OP_PONG,
  OP_TEXT,
} from './ws-frame.ts';
import { FrameParser, type WsEvent } from './ws-parser.ts';

export const DEFAULT_MAX_PAYLOAD = 16 * 1024 * 1024;
const DEFAULT_CLOSE_TIMEOUT_MS = 30_000;
/** Below this a frame is copied into one write; above, header and payload go out corked. */
const COPY_LIMIT = 16 * 1024;
const EMPTY = Buffer.alloc(0);
const STATE_NAMES = ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED'];

export interface WebSocketOptions {
  /** The subprotocol the handshake selected; '' for none. */
  protocol?: string;
  /** The largest message accepted, in bytes; a larger one closes with 1009. */
  maxPayload?: number;
  /** How long close() waits for the peer's close frame before cutting the connection. */
  closeTimeoutMs?: number;
  /**
   * A listener of this socket threw. Without this, the error is thrown on,
   * as EventEmitter does: out of an I/O callback, that ends the process.
   */
  onListenerError?: (err: unknown) => void;
}

export interface SendOptions {
  /** Send as a binary frame (default: binary unless `data` is a string or number). */
  binary?: boolean;
  /** false: more fragments of this message follow. */
  fin?: boolean;
}

export type SendCallback = (err?: Error | null) => void;

/** The peer broke the protocol; `closeCode` is the code the connection was closed with. */
export class WebSocketError extends Error {
  readonly closeCode: number;
  constructor(message: string, closeCode: number) {
    super(message);
    this.name = 'WebSocketError';
    this.closeCode = closeCode;
  }
}

function toBuffer(data: unknown): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (typeof data === 'string') return Buffer.from(data);
  // `ws` sends numbers as their decimal text.
  if (typeof data === 'number') return Buffer.from(String(data));
  if (data instanceof ArrayBuffer || data instanceof SharedArrayBuffer) return Buffer.from(data);
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('WebSocket data must be a string, Buffer, ArrayBuffer or ArrayBufferView');
}

export class WebSocket extends EventEmitter {
  static readonly CONNECTING = 0;
  static readonly OPEN = 1;
  static readonly CLOSING = 2;
  static readonly CLOSED = 3;
  readonly CONNECTING = 0;
  readonly OPEN = 1;
  readonly CLOSING = 2;
  readonly CLOSED = 3;
  readonly protocol: string;
  /** Always '': no extension is negotiated. */
  readonly extensions = '';

  readonly #socket: Duplex;
  readonly #parser: FrameParser;
  readonly #closeTimeoutMs: number;
  readonly #onListenerError: ((err: unknown) => void) | undefined;
  /** Reading stopped until what this side wrote has drained. */
  #readPaused = false;
  #readyState = WebSocket.OPEN;
  #closeSent = false;
  #closeCode = CLOSE_ABNORMAL;
  #closeReason: Buffer = EMPTY;
  #closeTimer: NodeJS.Timeout | undefined;
  /** A message sent with fin: false is still open, so the next frame continues it. */
  #sendingFragments = false;

  /** `head`: bytes already read past the handshake, the start of the frame stream. */
  constructor(socket: Duplex, head: Buffer = EMPTY, options: WebSocketOptions = {}) {
    super();
    this.#socket = socket;
    this.protocol = options.protocol ?? '';
    this.#parser = new FrameParser(options.maxPayload ?? DEFAULT_MAX_PAYLOAD);
    this.#closeTimeoutMs = options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
    this.#onListenerError = options.onListenerError;
    // Back into the stream rather than parsed now: the caller has not had a
    // chance to listen for 'message' yet, and the data events start on a later tick.
    if (head.length > 0) socket.unshift(head);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    // The HTTP server lets a peer half-close; a WebSocket has no use for that.
    socket.on('end', () => {
      this.#going();
      if (!socket.writableEnded) socket.end();
    });
    // A reset or a write to a gone peer: 'close' follows and reports 1006.
    socket.on('error', () => this.#going());
    socket.on('close', () => this.#onClose());
  }

  get readyState(): number {
    return this.#readyState;
  }

  /** Bytes handed to send() and not yet written to the connection. */
  get bufferedAmount(): number {
    return this.#socket.writableLength;
  }

  send(data: unknown, options?: SendOptions | SendCallback, cb?: SendCallback): void {
    if (typeof options === 'function') {
      cb = options;
      options = undefined;
    }
    const payload = toBuffer(data);
    if (this.#readyState !== WebSocket.OPEN) {
      this.#notOpen(cb);
      return;
    }
    const binary = options?.binary ?? !(typeof data === 'string' || typeof data === 'number');
    const fin = options?.fin ?? true;
    const opcode = this.#sendingFragments ? OP_CONTINUATION : binary ? OP_BINARY : OP_TEXT;
    this.#sendingFragments = !fin;
    this.#write(opcode, fin, payload, cb);
  }

  /** `mask` is accepted for `ws`'s signature and ignored: a server never masks. */
  ping(data?: unknown, mask?: unknown, cb?: SendCallback): void {
    this.#control(OP_PING, data, mask, cb);
  }

  pong(data?: unknown, mask?: unknown, cb?: SendCallback): void {
    this.#control(OP_PONG, data, mask, cb);
  }

  /**
   * Starts the closing handshake: sends a close frame and waits for the
   * peer's (the connection ends then), or cuts the connection after the
   * close timeout. Without a code the close frame is empty.
   */
  close(code?: number, reason?: string | Buffer): void {
    if (this.#readyState === WebSocket.CLOSED || this.#closeSent) return;
    const payload = closePayload(code, reason);
    this.#readyState = WebSocket.CLOSING;
    this.#sendClose(payload);
    this.#armCloseTimer();
  }

  /** Cuts the connection at once, without a closing handshake ('close' reports 1006). */
  terminate(): void {
    if (this.#readyState === WebSocket.CLOSED) return;
    this.#readyState = WebSocket.CLOSING;
    this.#socket.destroy();
  }

  #control(opcode: number, data: unknown, mask: unknown, cb: SendCallback | undefined): void {
    if (typeof data === 'function') {
      cb = data as SendCallback;
      data = undefined;
    } else if (typeof mask === 'function') {
      cb = mask as SendCallback;
    }
    const payload = data === undefined ? EMPTY : toBuffer(data);
    if (payload.length > MAX_CONTROL_PAYLOAD) throw new RangeError(`ping and pong data must not exceed ${MAX_CONTROL_PAYLOAD} bytes`);
    if (this.#readyState !== WebSocket.OPEN) {
      this.#notOpen(cb);
      return;
    }
    this.#write(opcode, true, payload, cb);
  }

  #notOpen(cb: SendCallback | undefined): void {
    // As `ws` does: no throw, the callback hears of it.
    if (cb) {
      const state = this.#readyState;
      process.nextTick(cb, new Error(`WebSocket is not open: readyState ${state} (${STATE_NAMES[state]})`));
    }
  }

  #write(opcode: number, fin: boolean, payload: Buffer, cb?: SendCallback): void {
    const socket = this.#socket;
    // The peer ended the connection and 'close' has not come yet.
    if (!socket.writable) {
      this.#notOpen(cb);
      return;
    }
    const header = frameHeader(opcode, fin, payload.length);
    if (payload.length <= COPY_LIMIT) {
      socket.write(Buffer.concat([header, payload], header.length + payload.length), cb);
      return;
    }
    // A large payload is not copied; corked, the two writes still leave as one.
    socket.cork();
    socket.write(header);
    socket.write(payload, cb);
    socket.uncork();
  }

  #sendClose(payload: Buffer): void {
    this.#closeSent = true;
    this.#write(OP_CLOSE, true, payload);
  }

  #armCloseTimer(): void {
    if (this.#closeTimer !== undefined) return;
    // The socket keeps the process alive while it is open; the timer need not.
    this.#closeTimer = setTimeout(() => this.#socket.destroy(), this.#closeTimeoutMs).unref();
  }

  #onData(chunk: Buffer): void {
    const socket = this.#socket;
    for (const event of this.#parser.push(chunk)) {
      // A listener may have terminated the connection; what followed is moot.
      if (socket.destroyed) return;
      this.#dispatch(event);
    }
    // A peer that sends (pings, messages an echo answers) but does not read
    // would otherwise make this side queue replies without bound.
    if (socket.writableNeedDrain && !this.#readPaused) {
      this.#readPaused = true;
      socket.pause();
      socket.once('drain', this.#resumeReading);
    }
  }

  readonly #resumeReading = (): void => {
    this.#readPaused = false;
    this.#socket.resume();
  };

  /** emit() with a throwing listener reported, not thrown into the socket's callback. */
  #emitSafely(event: string, ...args: unknown[]): void {
    if (this.#onListenerError === undefined) {
      this.emit(event, ...args);
      return;
    }
    try {
      this.emit(event, ...args);
    } catch (err) {
      this.#onListenerError(err);
    }
  }

  #dispatch(event: WsEvent): void {
    switch (event.type) {
      case 'message':
        this.#emitSafely('message', event.data, event.isBinary);
        return;
      case 'ping':
        if (this.#readyState === WebSocket.OPEN) this.#write(OP_PONG, true, event.data);
        this.#emitSafely('ping', event.data);
        return;
      case 'pong':
        this.#emitSafely('pong', event.data);
        return;
      case 'close':
        this.#closeReceived(event.code, event.reason);
        return;
      case 'error':
        this.#fail(event.code, event.message);
        return;
    }
  }

  #closeReceived(code: number, reason: Buffer): void {
    this.#closeCode = code;
    this.#closeReason = reason;
    if (!this.#closeSent) {
      this.#readyState = WebSocket.CLOSING;
      this.#sendClose(code === CLOSE_NO_STATUS ? EMPTY : closePayload(code, undefined));
    }
    // The server ends the TCP connection first (RFC 6455 7.1.1).
    this.#socket.end();
    this.#armCloseTimer();
  }

  /** The peer broke the protocol: close with `code` and stop listening to it (RFC 6455 7.1.7). */
  #fail(code: number, message: string): void {
    if (!this.#closeSent) {
      this.#readyState = WebSocket.CLOSING;
      this.#sendClose(closePayload(code, message.slice(0, MAX_CLOSE_REASON)));
    }
    this.#socket.end();
    this.#armCloseTimer();
    // `ws` emits this unconditionally, which throws without a listener; a
    // misbehaving client must not be able to take down the whole worker.
    if (this.listenerCount('error') > 0) this.#emitSafely('error', new WebSocketError(message, code));
  }

  /** The connection is ending without a closing handshake from this side. */
  #going(): void {
    if (this.#readyState === WebSocket.OPEN) this.#readyState = WebSocket.CLOSING;
  }

  #onClose(): void {
    if (this.#closeTimer !== undefined) clearTimeout(this.#closeTimer);
    this.#readyState = WebSocket.CLOSED;
    this.#emitSafely('close', this.#closeCode, this.#closeReason);
  }
}

/** A close frame's payload: empty without a code, else the code and a UTF-8 reason. */
function closePayload(code: number | undefined, reason: string | Buffer | undefined): Buffer {
  if (code === undefined) return EMPTY;
  if (typeof code !== 'number' || !isValidCloseCode(code)) throw new TypeError(`invalid WebSocket close code: ${String(code)}`);
  const text = reason === undefined ? EMPTY : typeof reason === 'string' ? Buffer.from(reason) : toBuffer(reason);
  if (text.length > MAX_CLOSE_REASON) throw new RangeError(`a WebSocket close reason must not exceed ${MAX_CLOSE_REASON} bytes`);
  const payload = Buffer.allocUnsafe(2 + text.length);
  payload.writeUInt16BE(code, 0);
  text.copy(payload, 2);
  return payload;
}
