// Reading a client's frames (RFC 6455 5.2) into whole messages and control
// frames. TCP delivers frames in arbitrary pieces, so the parser keeps its
// place between calls. It stops at the first violation and names the close
// code the connection must be failed with, and it reads nothing after a
// close frame (RFC 6455 5.5.1).
import { isUtf8 } from 'node:buffer';
import {
  CLOSE_INVALID_DATA,
  CLOSE_NO_STATUS,
  CLOSE_PROTOCOL_ERROR,
  CLOSE_TOO_BIG,
  isValidCloseCode,
  MAX_CONTROL_PAYLOAD,
  OP_BINARY,
  OP_CLOSE,
  OP_CONTINUATION,
  OP_PING,
  OP_PONG,
} from './ws-frame.ts';

export type WsEvent =
  | { type: 'message'; data: Buffer; isBinary: boolean }
  | { type: 'ping'; data: Buffer }
  | { type: 'pong'; data: Buffer }
  | { type: 'close'; code: number; reason: Buffer }
  | { type: 'error'; code: number; message: string };

const EMPTY = Buffer.alloc(0);
/** The high 32 bits of 2^53 - 1: a 64-bit length above it is not a safe JS number. */
const MAX_SAFE_HIGH = 0x1fffff;

export class FrameParser {
  readonly #maxPayload: number;
  /** Header bytes waiting for the rest of their header (at most 13). */
  #pending: Buffer = EMPTY;
  #done = false;

  // The frame whose payload is being read.
  #inPayload = false;
  #fin = false;
  #opcode = 0;
  readonly #mask = Buffer.alloc(4);
  #payload: Buffer = EMPTY;
  #filled = 0;

  // The fragmented message being assembled; #messageOpcode 0 means none.
  #messageOpcode = 0;
  #fragments: Buffer[] = [];
  #fragmentsSize = 0;

  /** `maxPayload`: the largest message, in bytes, all its fragments together. */
  constructor(maxPayload: number) {
    this.#maxPayload = maxPayload;
  }

  /** The events the bytes complete, in order; the last one may be an error. */
  push(chunk: Buffer): WsEvent[] {
    const events: WsEvent[] = [];
    if (this.#done) return events;
    let data = chunk;
    if (this.#pending.length > 0) {
      data = Buffer.concat([this.#pending, chunk]);
      this.#pending = EMPTY;
    }
    let pos = 0;
    while (!this.#done) {
      if (this.#inPayload) {
        const n = Math.min(this.#payload.length - this.#filled, data.length - pos);
        this.#unmask(data, pos, n);
        pos += n;
        if (this.#filled < this.#payload.length) break;
        this.#inPayload = false;
        this.#finishFrame(events);
        continue;
      }
      const used = this.#readHeader(data, pos, events);
      if (used === 0) {
        // A copy, so a few header bytes do not keep a whole read buffer alive.
        if (!this.#done) this.#pending = Buffer.from(data.subarray(pos));
        break;
      }
      pos += used;
    }
    return events;
  }

  /** Bytes of header consumed; 0 when the header is incomplete or broke a rule. */
  #readHeader(data: Buffer, pos: number, events: WsEvent[]): number {
    const avail = data.length - pos;
    if (avail < 2) return 0;
    const b0 = data[pos];
    const b1 = data[pos + 1];
    const fin = (b0 & 0x80) !== 0;
    const opcode = b0 & 0x0f;
    const len7 = b1 & 0x7f;
    // Checked on the first two bytes, so a bad frame fails before its length arrives.
    const problem = this.#violation(b0, b1, fin, opcode, len7);
    if (problem !== undefined) return this.#fail(events, CLOSE_PROTOCOL_ERROR, problem);
    const extra = len7 === 126 ? 2 : len7 === 127 ? 8 : 0;
    if (avail < 2 + extra) return 0;
    let length = len7;
    if (extra === 2) {
      length = data.readUInt16BE(pos + 2);
    } else if (extra === 8) {
      const high = data.readUInt32BE(pos + 2);
      if (high > MAX_SAFE_HIGH) return this.#fail(events, CLOSE_TOO_BIG, 'frame length above 2^53 - 1');
      length = high * 2 ** 32 + data.readUInt32BE(pos + 6);
    }
    // Refused before any of it is buffered.
    if (opcode < OP_CLOSE && this.#fragmentsSize + length > this.#maxPayload) {
      return this.#fail(events, CLOSE_TOO_BIG, `message larger than ${this.#maxPayload} bytes`);
    }
    const size = 2 + extra + 4;
    if (avail < size) return 0;
    data.copy(this.#mask, 0, pos + 2 + extra, pos + size);
    this.#fin = fin;
    this.#opcode = opcode;
    // A fresh buffer rather than a view of the read buffer: a small message
    // must not pin a large chunk, and the caller's bytes stay untouched.
    this.#payload = length === 0 ? EMPTY : Buffer.allocUnsafe(length);
    this.#filled = 0;
    if (length === 0) this.#finishFrame(events);
    else this.#inPayload = true;
    return size;
  }

  #violation(b0: number, b1: number, fin: boolean, opcode: number, len7: number): string | undefined {
    if ((b0 & 0x70) !== 0) return 'RSV bits set, but no extension was negotiated';
    if ((b1 & 0x80) === 0) return 'client frames must be masked';
    const control = opcode >= OP_CLOSE;
    if (control ? opcode > OP_PONG : opcode > OP_BINARY) return `unknown opcode 0x${opcode.toString(16)}`;
    if (control) {
      if (!fin) return 'fragmented control frame';
      if (len7 > MAX_CONTROL_PAYLOAD) return `control frame payload over ${MAX_CONTROL_PAYLOAD} bytes`;
      return undefined;
    }
    if (opcode === OP_CONTINUATION && this.#messageOpcode === 0) return 'continuation frame without a message to continue';
    if (opcode !== OP_CONTINUATION && this.#messageOpcode !== 0) return 'new message before the fragmented one ended';
    return undefined;
  }

  #unmask(data: Buffer, pos: number, n: number): void {
    const out = this.#payload;
    const mask = this.#mask;
    let at = this.#filled;
    for (let i = 0; i < n; i++, at++) out[at] = data[pos + i] ^ mask[at & 3];
    this.#filled = at;
  }

  #finishFrame(events: WsEvent[]): void {
    const payload = this.#payload;
    this.#payload = EMPTY;
    const opcode = this.#opcode;
    if (opcode === OP_PING || opcode === OP_PONG) {
      events.push({ type: opcode === OP_PING ? 'ping' : 'pong', data: payload });
      return;
    }
    if (opcode === OP_CLOSE) {
      this.#closeFrame(payload, events);
      return;
    }
    if (opcode !== OP_CONTINUATION) this.#messageOpcode = opcode;
    if (!this.#fin) {
      // Empty fragments add nothing but would be kept: a stream of them must not grow memory.
      if (payload.length > 0) this.#fragments.push(payload);
      this.#fragmentsSize += payload.length;
      return;
    }
    const fragments = this.#fragments;
    const data = fragments.length === 0 ? payload : Buffer.concat([...fragments, payload], this.#fragmentsSize + payload.length);
    const isBinary = this.#messageOpcode === OP_BINARY;
    this.#messageOpcode = 0;
    this.#fragments = [];
    this.#fragmentsSize = 0;
    if (!isBinary && !isUtf8(data)) {
      this.#fail(events, CLOSE_INVALID_DATA, 'text message is not valid UTF-8');
      return;
    }
    events.push({ type: 'message', data, isBinary });
  }

  #closeFrame(payload: Buffer, events: WsEvent[]): void {
    if (payload.length === 0) {
      events.push({ type: 'close', code: CLOSE_NO_STATUS, reason: EMPTY });
    } else if (payload.length === 1) {
      this.#fail(events, CLOSE_PROTOCOL_ERROR, 'close frame with a 1-byte payload');
      return;
    } else {
      const code = payload.readUInt16BE(0);
      if (!isValidCloseCode(code)) {
        this.#fail(events, CLOSE_PROTOCOL_ERROR, `invalid close code ${code}`);
        return;
      }
      const reason = payload.subarray(2);
      if (!isUtf8(reason)) {
        this.#fail(events, CLOSE_INVALID_DATA, 'close reason is not valid UTF-8');
        return;
      }
      events.push({ type: 'close', code, reason });
    }
    this.#done = true;
  }

  #fail(events: WsEvent[], code: number, message: string): 0 {
    this.#done = true;
    this.#pending = EMPTY;
    this.#fragments = [];
    events.push({ type: 'error', code, message });
    return 0;
  }
}
