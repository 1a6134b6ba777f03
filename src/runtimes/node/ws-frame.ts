// The WebSocket wire format (RFC 6455, section 5) as both directions need it:
// opcodes, close codes, and the header of a frame the server sends.

export const OP_CONTINUATION = 0x0;
export const OP_TEXT = 0x1;
export const OP_BINARY = 0x2;
export const OP_CLOSE = 0x8;
export const OP_PING = 0x9;
export const OP_PONG = 0xa;

/** Control frames (close, ping, pong) carry at most this much (RFC 6455 5.5). */
export const MAX_CONTROL_PAYLOAD = 125;
/** A close reason: the control limit less the two bytes of the code. */
export const MAX_CLOSE_REASON = MAX_CONTROL_PAYLOAD - 2;

export const CLOSE_NORMAL = 1000;
export const CLOSE_GOING_AWAY = 1001;
export const CLOSE_PROTOCOL_ERROR = 1002;
/** Reported, never sent: the close frame had no code. */
export const CLOSE_NO_STATUS = 1005;
/** Reported, never sent: the connection ended without a close frame. */
export const CLOSE_ABNORMAL = 1006;
export const CLOSE_INVALID_DATA = 1007;
export const CLOSE_TOO_BIG = 1009;
export const CLOSE_INTERNAL_ERROR = 1011;

/**
 * A code that may travel in a close frame: the registered ones except the
 * reserved 1004 and the report-only 1005, 1006 and 1015, and the ranges left
 * to libraries (3000-3999) and applications (4000-4999).
 */
export function isValidCloseCode(code: number): boolean {
  if (!Number.isInteger(code)) return false;
  if (code >= 3000 && code <= 4999) return true;
  return code >= 1000 && code <= 1014 && code !== 1004 && code !== CLOSE_NO_STATUS && code !== CLOSE_ABNORMAL;
}

/** A server frame's header: FIN, opcode and length, never masked (RFC 6455 5.1). */
export function frameHeader(opcode: number, fin: boolean, length: number): Buffer {
  const first = (fin ? 0x80 : 0) | opcode;
  if (length < 126) return Buffer.from([first, length]);
  if (length < 0x10000) {
    const h = Buffer.allocUnsafe(4);
    h[0] = first;
    h[1] = 126;
    h.writeUInt16BE(length, 2);
    return h;
  }
  const h = Buffer.allocUnsafe(10);
  h[0] = first;
  h[1] = 127;
  h.writeBigUInt64BE(BigInt(length), 2);
  return h;
}
