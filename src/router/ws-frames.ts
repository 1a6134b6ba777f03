// Just enough of the WebSocket wire format (RFC 6455, section 5) for the
// router to close a tunnel it ends at a streaming limit properly: it follows
// each direction frame by frame, without keeping any payload, so that a
// close frame can go in between two frames, never inside one.
import { randomBytes } from 'node:crypto';

/** RFC 6455 7.4.1: the endpoint is going away (as API gateways close idle WebSockets). */
export const CLOSE_GOING_AWAY = 1001;
/** A close frame's payload is at most 125 bytes, two of them the code. */
const MAX_CLOSE_REASON = 123;
const OP_CLOSE = 0x8;

/** Follows one direction of a WebSocket connection to tell whether it stands between two frames. */
export class FrameBoundary {
  /** Header bytes read of the frame being started, and how many it has. */
  readonly #header = Buffer.alloc(14);
  #have = 0;
  #need = 2;
  /** Payload bytes of the current frame not seen yet. Infinity for a length past 2^53: such a frame never ends here. */
  #payloadLeft = 0;

  /** True when everything seen so far is whole frames. */
  get between(): boolean {
    return this.#have === 0 && this.#payloadLeft === 0;
  }

  /** Bytes in the order they travel. */
  feed(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.#payloadLeft > 0) {
        const take = Math.min(this.#payloadLeft, chunk.length - at);
        this.#payloadLeft -= take;
        at += take;
        continue;
      }
      this.#header[this.#have++] = chunk[at++];
      if (this.#have === 2) {
        const len7 = this.#header[1] & 0x7f;
        const masked = (this.#header[1] & 0x80) !== 0;
        this.#need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (masked ? 4 : 0);
      }
      if (this.#have >= 2 && this.#have === this.#need) this.#startPayload();
    }
  }

  #startPayload(): void {
    const h = this.#header;
    const len7 = h[1] & 0x7f;
    let length: number;
    if (len7 === 126) length = h.readUInt16BE(2);
    else if (len7 === 127) {
      const big = h.readBigUInt64BE(2);
      length = big > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(big);
    } else length = len7;
    this.#payloadLeft = length;
    this.#have = 0;
    this.#need = 2;
  }
}

/**
 * A close frame with `code` and `reason` (cut to fit). `masked` for one going
 * to the server: RFC 6455 5.3 has every client frame masked.
 */
export function closeFrame(code: number, reason: string, masked: boolean): Buffer {
  let text = Buffer.from(reason);
  if (text.length > MAX_CLOSE_REASON) text = text.subarray(0, MAX_CLOSE_REASON);
  const payload = Buffer.allocUnsafe(2 + text.length);
  payload.writeUInt16BE(code, 0);
  text.copy(payload, 2);
  if (!masked) return Buffer.concat([Buffer.from([0x80 | OP_CLOSE, payload.length]), payload]);
  const mask = randomBytes(4);
  for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
  return Buffer.concat([Buffer.from([0x80 | OP_CLOSE, 0x80 | payload.length]), mask, payload]);
}
