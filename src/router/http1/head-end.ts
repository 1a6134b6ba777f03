// Finding the end of a message head in bytes that may hold only part of it,
// for both directions: the router's request parser and the worker client's
// response parser.
import { CRLF2 } from './body-decoder.ts';

const LF2 = Buffer.from('\n\n');

export interface HeadRefusals {
  /** The head is longer than the parser's limit. */
  tooLarge(): Error;
  /**
   * Lines end in a bare LF: waiting for a CRLF that never comes would end as
   * a timeout instead of the refusal it is.
   */
  bareLf(): Error;
}

/**
 * The index of the CRLFCRLF that ends the head starting at `pos`, or -1 when
 * more bytes are needed. Throws the parser's own error for a head over
 * `maxBytes` or one whose lines end in a bare LF.
 */
export function headEnd(buf: Buffer, pos: number, maxBytes: number, refuse: HeadRefusals): number {
  const end = buf.indexOf(CRLF2, pos);
  if (end === -1) {
    if (buf.length - pos > maxBytes) throw refuse.tooLarge();
    if (buf.indexOf(LF2, pos) !== -1) throw refuse.bareLf();
    return -1;
  }
  if (end - pos > maxBytes) throw refuse.tooLarge();
  return end;
}
