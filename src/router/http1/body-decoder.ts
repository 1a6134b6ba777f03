// Message body framing (RFC 9112 section 6-7), shared by the router's two
// HTTP/1.1 parsers: requests from clients and responses from instances.
// Strict where leniency could desynchronise a reused connection.
//
// Body chunks are handed on as views of the socket's buffers, never copied.
import { isFieldValue, isToken } from './chars.ts';

export interface BodySink {
  /**
   * `last` when the chunk ends a Content-Length body. Returning false stops
   * decoding after this chunk, so the reader can apply backpressure.
   */
  onBody(chunk: Buffer, last: boolean): boolean;
}

/** Makes the error a framing fault is thrown as (a bad request, or a bad response). */
export type FramingError = (what: string) => Error;

export const CRLF2 = Buffer.from('\r\n\r\n');
const MAX_CHUNK_LINE = 4096;
/** Trailers are checked and dropped; past this size they are refused. */
const MAX_TRAILER_BYTES = 16 * 1024;
const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
/**
 * chunk-size [ chunk-ext ] (RFC 9112 7.1.1), nothing looser: a lenient peer in
 * front must not read it differently. Leading zeros are allowed; more than 12
 * hex digits after them (256 TiB) are refused, not rounded (RFC 9112 7.1).
 */
const CHUNK_LINE = new RegExp(`^0*([0-9a-fA-F]{1,12})(?:[ \\t]*;[ \\t]*${TOKEN}(?:[ \\t]*=[ \\t]*(?:${TOKEN}|"(?:[\\t \\x21\\x23-\\x5b\\x5d-\\x7e\\x80-\\xff]|\\\\[\\t \\x21-\\x7e\\x80-\\xff])*"))?)*$`);

const Phase = {
  Fixed: 0,
  ChunkSize: 1,
  ChunkData: 2,
  ChunkDataEnd: 3,
  Trailers: 4,
  UntilClose: 5,
  Done: 6,
} as const;
type Phase = (typeof Phase)[keyof typeof Phase];

export class BodyDecoder {
  readonly #sink: BodySink;
  readonly #error: FramingError;
  #phase: Phase = Phase.Done;
  #remaining = 0;

  constructor(sink: BodySink, error: FramingError) {
    this.#sink = sink;
    this.#error = error;
  }

  /** A Content-Length body (0 for none). */
  fixed(length: number): void {
    this.#remaining = length;
    this.#phase = length === 0 ? Phase.Done : Phase.Fixed;
  }

  chunked(): void {
    this.#phase = Phase.ChunkSize;
  }

  /** A response body that ends when the connection does. */
  untilClose(): void {
    this.#phase = Phase.UntilClose;
  }

  get done(): boolean {
    return this.#phase === Phase.Done;
  }

  get untilCloseBody(): boolean {
    return this.#phase === Phase.UntilClose;
  }

  /** The connection closed: true when that ends a read-until-close body. */
  finishOnClose(): boolean {
    if (this.#phase !== Phase.UntilClose) return false;
    this.#phase = Phase.Done;
    return true;
  }

  /**
   * Decodes from `pos`; returns where it stopped: at the end of the body
   * (`done`), where the sink pushed back, or at an incomplete chunk line the
   * caller must keep and hand back with the next bytes.
   */
  decode(buf: Buffer, start: number): number {
    let pos = start;
    const len = buf.length;
    while (pos < len) {
      switch (this.#phase) {
        case Phase.Fixed: {
          const n = Math.min(this.#remaining, len - pos);
          this.#remaining -= n;
          const chunk = buf.subarray(pos, pos + n);
          pos += n;
          if (this.#remaining === 0) {
            this.#phase = Phase.Done;
            this.#sink.onBody(chunk, true);
            return pos;
          }
          if (!this.#sink.onBody(chunk, false)) return pos;
          break;
        }
        case Phase.ChunkSize: {
          const eol = buf.indexOf(0x0a, pos);
          if (eol === -1 ? len - pos > MAX_CHUNK_LINE : eol - pos > MAX_CHUNK_LINE) throw this.#error('chunk size line too long');
          if (eol === -1) return pos;
          if (eol === pos || buf[eol - 1] !== 0x0d) throw this.#error('chunk size line does not end in CRLF');
          const line = buf.toString('latin1', pos, eol - 1);
          pos = eol + 1;
          this.#chunkSize(line);
          break;
        }
        case Phase.ChunkData: {
          const n = Math.min(this.#remaining, len - pos);
          this.#remaining -= n;
          const chunk = buf.subarray(pos, pos + n);
          pos += n;
          if (this.#remaining === 0) this.#phase = Phase.ChunkDataEnd;
          if (!this.#sink.onBody(chunk, false)) return pos;
          break;
        }
        case Phase.ChunkDataEnd: {
          if (len - pos < 2) return pos;
          if (buf[pos] !== 0x0d || buf[pos + 1] !== 0x0a) throw this.#error('chunk data not followed by CRLF');
          pos += 2;
          this.#phase = Phase.ChunkSize;
          break;
        }
        case Phase.Trailers: {
          if (len - pos < 2) return pos;
          let end = pos;
          if (buf[pos] !== 0x0d || buf[pos + 1] !== 0x0a) {
            const at = buf.indexOf(CRLF2, pos);
            if (at === -1 ? len - pos > MAX_TRAILER_BYTES : at - pos > MAX_TRAILER_BYTES) throw this.#error(`trailers larger than ${MAX_TRAILER_BYTES} bytes`);
            if (at === -1) return pos;
            this.#checkTrailers(buf.toString('latin1', pos, at));
            end = at + 2;
          }
          this.#phase = Phase.Done;
          return end + 2;
        }
        case Phase.UntilClose: {
          const chunk = pos === 0 ? buf : buf.subarray(pos);
          this.#sink.onBody(chunk, false);
          return len;
        }
        case Phase.Done:
          return pos;
      }
    }
    return pos;
  }

  /** Trailer lines must be well-formed header lines, so every reader agrees where they end. */
  #checkTrailers(block: string): void {
    for (const line of block.split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon <= 0 || !isToken(line.slice(0, colon)) || !isFieldValue(line.slice(colon + 1))) {
        throw this.#error(`bad trailer line ${JSON.stringify(line.slice(0, 64))}`);
      }
    }
  }

  #chunkSize(line: string): void {
    const m = CHUNK_LINE.exec(line);
    if (m === null) throw this.#error(`bad chunk size line ${JSON.stringify(line.slice(0, 32))}`);
    const size = Number.parseInt(m[1], 16);
    if (size === 0) {
      this.#phase = Phase.Trailers;
      return;
    }
    this.#remaining = size;
    this.#phase = Phase.ChunkData;
  }
}
