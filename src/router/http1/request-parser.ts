// An incremental HTTP/1.1 request parser for the router's client
// connections. Strict in the ways that keep a reused connection in step with
// the client and with anything in front of the router (RFC 9112): one Host,
// one Content-Length, no Transfer-Encoding but chunked, never both, no
// folded or bare-LF lines, header names that are tokens and values without
// control characters. A request it refuses ends the connection.
//
// One request at a time: bytes after a complete request are kept, not
// parsed, until next() says the response to it is done.
import { FlintError } from '../../api/errors.ts';
import { BodyDecoder, type BodySink } from './body-decoder.ts';
import { isAbsoluteTarget, isFieldValue, isTarget, isToken, listHas, trimOws } from './chars.ts';
import { type HeadRefusals, headEnd } from './head-end.ts';
import { RememberedHead } from './remembered-head.ts';

export interface RequestHead {
  readonly method: string;
  /** The request target as sent (origin form, or absolute form). */
  readonly url: string;
  readonly http10: boolean;
  /** Name/value pairs as sent (latin1), like node:http's rawHeaders; frozen once remembered (a repeated head shares its list). */
  readonly rawHeaders: readonly string[];
  /** The client lets the connection carry another request after this one. */
  readonly keepAlive: boolean;
  /** A body follows (a Content-Length above 0, or chunked). */
  readonly hasBody: boolean;
  readonly expectContinue: boolean;
  /**
   * The protocol the client asks to switch to (its `Upgrade` header), when
   * `Connection` names `upgrade` on an HTTP/1.1 request without a body.
   * Bytes after such a head belong to that protocol: they are never parsed.
   */
  readonly upgrade: string | undefined;
}

export interface RequestSink extends BodySink {
  /** A request head; when it has a body, onBody calls and one onRequestEnd follow. */
  onRequest(head: RequestHead): void;
  onRequestEnd(): void;
}

/**
 * The longest request head a connection remembers (http1/remembered-head.ts):
 * most API clients' heads are shorter, and an idle client connection holds
 * this much (and the strings parsed from it) until its next request.
 */
const MAX_REMEMBERED_REQUEST_HEAD = 1024;

/** node:http's default: larger heads are refused with 431. */
export const MAX_REQUEST_HEAD_BYTES = 16 * 1024;

const State = { Head: 0, Body: 1, Done: 2 } as const;
type State = (typeof State)[keyof typeof State];

export function badRequest(what: string): FlintError {
  return new FlintError('FLINT_ERR_VALIDATION', `malformed HTTP request: ${what}`);
}

function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

export class RequestParser implements BodySink {
  readonly #sink: RequestSink;
  readonly #body: BodyDecoder;
  #state: State = State.Head;
  /** A head split across reads, bytes held after a push-back, or the next request's bytes. */
  #partial: Buffer | undefined = undefined;
  #executing = false;
  readonly #last = new RememberedHead<ParsedRequestHead>(MAX_REMEMBERED_REQUEST_HEAD);

  constructor(sink: RequestSink) {
    this.#sink = sink;
    this.#body = new BodyDecoder(this, badRequest);
  }

  /** Bytes kept for later: a head still arriving, or requests sent ahead of their turn. */
  get buffered(): number {
    return this.#partial === undefined ? 0 : this.#partial.length;
  }

  /** Whether a request head has begun arriving (or is waiting its turn). */
  get midRequest(): boolean {
    return this.#state !== State.Head || this.#partial !== undefined;
  }

  onBody(chunk: Buffer, last: boolean): boolean {
    return this.#sink.onBody(chunk, last);
  }

  /** The bytes after the current request, handed over with the connection after an upgrade. */
  takeRest(): Buffer {
    const rest = this.#partial ?? EMPTY;
    this.#partial = undefined;
    return rest;
  }

  /** The response to the current request is done: parse the next one. */
  next(): void {
    this.#state = State.Head;
    // Called from inside execute() (a response sent synchronously), the loop there goes on by itself.
    if (!this.#executing && this.#partial !== undefined) this.execute(EMPTY);
  }

  /** Feed bytes from the socket; throws a FlintError on a request it refuses. */
  execute(data: Buffer): void {
    let buf = data;
    if (this.#partial !== undefined) {
      buf = data.length === 0 ? this.#partial : Buffer.concat([this.#partial, data]);
      this.#partial = undefined;
    }
    this.#executing = true;
    try {
      this.#run(buf);
    } finally {
      this.#executing = false;
    }
  }

  #run(buf: Buffer): void {
    let pos = 0;
    const len = buf.length;
    while (pos < len) {
      switch (this.#state) {
        case State.Head: {
          // RFC 9112 2.2: empty lines before a request line are ignored.
          while (pos + 1 < len && buf[pos] === 0x0d && buf[pos + 1] === 0x0a) pos += 2;
          if (pos >= len) return;
          const end = headEnd(buf, pos, MAX_REQUEST_HEAD_BYTES, REFUSALS);
          if (end === -1) {
            this.#partial = buf.subarray(pos);
            return;
          }
          // Parsed only when it differs from the last head remembered.
          const head = this.#last.parse(buf, pos, end, parseRequestHead, freezeHead);
          pos = end + 4;
          this.#head(head);
          break;
        }
        case State.Body: {
          pos = this.#body.decode(buf, pos);
          if (this.#body.done) {
            this.#state = State.Done;
            this.#sink.onRequestEnd();
          } else if (pos < len) {
            this.#partial = buf.subarray(pos);
            return;
          }
          break;
        }
        case State.Done:
          // The next request waits for the response to this one.
          this.#partial = buf.subarray(pos);
          return;
      }
    }
  }

  #head(head: ParsedRequestHead): void {
    if (head.chunked) this.#body.chunked();
    else this.#body.fixed(head.contentLength);
    this.#state = head.request.hasBody ? State.Body : State.Done;
    this.#sink.onRequest(head.request);
  }
}

const EMPTY = Buffer.alloc(0);

/** A request head's meaning and framing; shared by every request with the same head bytes on a connection. */
interface ParsedRequestHead {
  readonly request: RequestHead;
  readonly chunked: boolean;
  /** The body's length when not chunked (0 without one). */
  readonly contentLength: number;
}

/** A head's meaning, made safe to share between the requests that repeat it. */
function freezeHead(head: ParsedRequestHead): ParsedRequestHead {
  Object.freeze(head.request.rawHeaders);
  Object.freeze(head.request);
  return Object.freeze(head);
}

/** Parses a request head (without its blank line); throws a FlintError on one the router refuses. */
function parseRequestHead(head: string): ParsedRequestHead {
  const lineEnd0 = head.indexOf('\r\n');
  const lineEnd = lineEnd0 === -1 ? head.length : lineEnd0;
  const sp1 = head.indexOf(' ');
  const sp2 = sp1 === -1 ? -1 : head.indexOf(' ', sp1 + 1);
  if (sp1 <= 0 || sp2 === -1 || sp2 >= lineEnd) throw badRequest(`bad request line ${JSON.stringify(head.slice(0, Math.min(lineEnd, 64)))}`);
  const method = head.slice(0, sp1);
  if (!isToken(method)) throw badRequest(`bad method ${JSON.stringify(method.slice(0, 32))}`);
  // CONNECT asks for a tunnel (RFC 9110 9.3.6): what follows its head is not
  // HTTP, and the router opens no tunnels, so the request is not read as one.
  if (method === 'CONNECT') throw new FlintError('FLINT_ERR_NOT_IMPLEMENTED', 'CONNECT is not supported: the router opens no tunnels');
  if (!isTarget(head, sp1 + 1, sp2)) throw badRequest('the request target is empty or has a character that must be percent-encoded');
  // Origin form, absolute form, or `*` for a server-wide OPTIONS (RFC 9112
  // 3.2); anything else is no target at all, and is refused rather than guessed at.
  const first = head.charCodeAt(sp1 + 1);
  if (first !== 0x2f && !(first === 0x2a && sp2 === sp1 + 2 && method === 'OPTIONS') && !isAbsoluteTarget(head, sp1 + 1, sp2)) {
    throw badRequest(`the request target ${JSON.stringify(head.slice(sp1 + 1, Math.min(sp2, sp1 + 65)))} is not in origin, absolute or asterisk form`);
  }
  const url = head.slice(sp1 + 1, sp2);
  let http10: boolean;
  if (lineEnd - sp2 === 9 && head.startsWith('HTTP/1.', sp2 + 1)) {
    const minor = head.charCodeAt(sp2 + 8);
    if (minor !== 0x30 && minor !== 0x31) throw badRequest(`unsupported version ${JSON.stringify(head.slice(sp2 + 1, lineEnd))}`);
    http10 = minor === 0x30;
  } else {
    throw badRequest(`unsupported version ${JSON.stringify(head.slice(sp2 + 1, Math.min(lineEnd, sp2 + 17)))}`);
  }

  const rawHeaders: string[] = [];
  let contentLength = -1;
  let transferEncoding: string | undefined;
  let connection = '';
  let hosts = 0;
  let expect: string | undefined;
  let upgrade: string | undefined;
  let start = lineEnd0 === -1 ? head.length : lineEnd0 + 2;
  while (start < head.length) {
    let end = head.indexOf('\r\n', start);
    if (end === -1) end = head.length;
    const first = head.charCodeAt(start);
    if (isOws(first)) throw badRequest('folded header lines are not allowed');
    const colon = head.indexOf(':', start);
    if (colon <= start || colon > end) throw badRequest(`bad header line ${JSON.stringify(head.slice(start, Math.min(end, start + 64)))}`);
    const name = head.slice(start, colon);
    if (!isToken(name)) throw badRequest(`bad header name ${JSON.stringify(name.slice(0, 64))}`);
    let vs = colon + 1;
    let ve = end;
    while (vs < ve && isOws(head.charCodeAt(vs))) vs++;
    while (ve > vs && isOws(head.charCodeAt(ve - 1))) ve--;
    const value = head.slice(vs, ve);
    if (!isFieldValue(value)) throw badRequest(`header ${name} has a control character in its value`);
    start = end + 2;
    switch (name.length) {
      case 4:
        if (name.toLowerCase() === 'host') hosts++;
        break;
      case 6:
        if (name.toLowerCase() === 'expect') expect = value.toLowerCase();
        break;
      case 7:
        if (name.toLowerCase() === 'upgrade') upgrade = upgrade === undefined ? value : `${upgrade}, ${value}`;
        break;
      case 10:
        if (name.toLowerCase() === 'connection') connection = connection === '' ? value : `${connection}, ${value}`;
        break;
      case 14:
        if (name.toLowerCase() === 'content-length') {
          if (contentLength !== -1) throw badRequest('more than one Content-Length');
          // Leading zeros are allowed (1*DIGIT); more than 15 digits after them could lose precision as a number (RFC 9110 8.6).
          if (!CONTENT_LENGTH.test(value)) throw badRequest(`bad Content-Length ${JSON.stringify(value.slice(0, 32))}`);
          contentLength = Number(value);
        }
        break;
      case 17:
        if (name.toLowerCase() === 'transfer-encoding') transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`;
        break;
    }
    rawHeaders.push(name, value);
  }
  if (!http10 && hosts !== 1) throw badRequest(hosts === 0 ? 'no Host header' : 'more than one Host header');
  if (hosts > 1) throw badRequest('more than one Host header');

  const chunked = transferEncoding !== undefined;
  if (transferEncoding !== undefined) {
    // Both framings, or a coding the router cannot take off, could make it
    // and a proxy in front disagree on where the request ends (RFC 9112 6.3).
    if (contentLength !== -1) throw badRequest('both Transfer-Encoding and Content-Length');
    if (http10) throw badRequest('Transfer-Encoding in an HTTP/1.0 request');
    if (transferEncoding.toLowerCase() !== 'chunked') {
      throw new FlintError('FLINT_ERR_NOT_IMPLEMENTED', `Transfer-Encoding ${JSON.stringify(transferEncoding.slice(0, 64))} is not supported: only chunked`);
    }
  }
  const hasBody = chunked || contentLength > 0;
  let expectContinue = false;
  if (expect !== undefined) {
    if (expect !== '100-continue') throw new FlintError('FLINT_ERR_EXPECTATION_FAILED', `Expect ${JSON.stringify(expect.slice(0, 64))} is not supported`);
    expectContinue = !http10;
  }
  let keepAlive: boolean;
  if (connection === '') {
    keepAlive = !http10;
    upgrade = undefined;
  } else {
    const conn = connection.toLowerCase();
    // Whole list members (RFC 9110 7.6.1): `Connection: :keep-alive` asks for nothing.
    keepAlive = http10 ? listHas(conn, 'keep-alive') : !listHas(conn, 'close');
    // A body would have to be forwarded before the switch; no client sends one with a WebSocket handshake.
    if (upgrade !== undefined && (http10 || hasBody || upgrade === '' || !listHas(conn, 'upgrade'))) upgrade = undefined;
    // h2c cannot be carried out through a proxy (HTTP2-Settings is hop-by-hop): the request is served as the plain one it also is.
    else if (upgrade !== undefined && trimOws(upgrade).toLowerCase() === 'h2c') upgrade = undefined;
  }
  const request: RequestHead = { method, url, http10, rawHeaders, keepAlive, hasBody, expectContinue, upgrade };
  return { request, chunked, contentLength: chunked ? -1 : Math.max(contentLength, 0) };
}

const CONTENT_LENGTH = /^0*\d{1,15}$/;

const REFUSALS: HeadRefusals = {
  tooLarge: () => new FlintError('FLINT_ERR_HEADERS_TOO_LARGE', `the request head is larger than ${MAX_REQUEST_HEAD_BYTES} bytes`),
  bareLf: () => badRequest('lines end in a bare LF'),
};
