// An incremental HTTP/1.x response parser for the router's connections to
// function instances. It is strict where leniency could desynchronise a
// reused connection (framing: Content-Length, chunked, read-until-close), and
// refuses header lines that are not name (a token), colon, value: a stray CR
// or LF inside one is where a lenient reader would see another line, and
// another framing.
//
// Body chunks are handed on as views of the socket's buffers, never copied.
import { BodyDecoder, type BodySink } from '../http1/body-decoder.ts';
import { isFieldValue, isToken, listHas, trimOws } from '../http1/chars.ts';
import { type HeadRefusals, headEnd } from '../http1/head-end.ts';
import { RememberedHead } from '../http1/remembered-head.ts';
import { badResponse } from './errors.ts';

export interface ResponseSink {
  /** A final (non-1xx) response head; headers as name/value pairs, latin1. */
  onHead(status: number, headers: readonly string[]): void;
  /**
   * `last` when the chunk ends a Content-Length body (and onEnd follows at
   * once). Returning false stops the parser: the rest of the bytes are held
   * until the next execute() (`resume()` with nothing new).
   */
  onBody(chunk: Buffer, last: boolean): boolean;
  /** The response is complete. */
  onEnd(): void;
  /** A 101 to a request that asked to upgrade: what follows is the other protocol's (takeRest()). */
  onUpgrade(headers: readonly string[]): void;
}

/** Larger heads are refused: a runaway or hostile instance must not fill memory. */
export const MAX_HEAD_BYTES = 64 * 1024;

const REFUSALS: HeadRefusals = {
  tooLarge: () => badResponse(`response head larger than ${MAX_HEAD_BYTES} bytes`),
  bareLf: () => badResponse('response head lines end in a bare LF'),
};

// Parser states (plain numbers: the project's TypeScript has no enums).
const State = {
  Idle: 0,
  Head: 1,
  Body: 2,
  Done: 3,
  Upgraded: 4,
} as const;
type State = (typeof State)[keyof typeof State];

const KEEP_ALIVE_TIMEOUT = /(?:^|[\s,])timeout=(\d+)/i;

export class ResponseParser implements BodySink {
  readonly #sink: ResponseSink;
  readonly #body: BodyDecoder;
  #state: State = State.Idle;
  /** A head (or chunk-size line, or trailers) split across reads, or bytes held after a push-back. */
  #partial: Buffer | undefined = undefined;
  #noBody = false;
  #upgrade = false;
  readonly #last = new RememberedHead<ParsedHead>();
  /** After the response: whether the connection may carry another request. */
  keepAlive = true;
  /** The instance's `Keep-Alive: timeout=N`, in ms; undefined when it sent none. */
  keepAliveHintMs: number | undefined = undefined;
  /** Bytes arrived after the response was complete. */
  trailingBytes = false;

  constructor(sink: ResponseSink) {
    this.#sink = sink;
    this.#body = new BodyDecoder(this, badResponse);
  }

  /** Expect the response to a new request; `noBody` for HEAD requests, `upgrade` when it asked to switch protocols. */
  start(noBody: boolean, upgrade = false): void {
    this.#state = State.Head;
    this.#partial = undefined;
    this.#noBody = noBody;
    this.#upgrade = upgrade;
    this.keepAlive = true;
    this.keepAliveHintMs = undefined;
    this.trailingBytes = false;
  }

  get done(): boolean {
    return this.#state === State.Done;
  }

  /** The connection closed: true when that ends a read-until-close body. */
  finishOnClose(): boolean {
    if (this.#state !== State.Body || !this.#body.finishOnClose()) return false;
    this.#state = State.Done;
    this.#sink.onEnd();
    return true;
  }

  onBody(chunk: Buffer, last: boolean): boolean {
    return this.#sink.onBody(chunk, last);
  }

  /** Feed bytes from the socket; throws an UpstreamError on a malformed response. */
  execute(data: Buffer): void {
    let buf = data;
    if (this.#partial !== undefined) {
      buf = data.length === 0 ? this.#partial : Buffer.concat([this.#partial, data]);
      this.#partial = undefined;
    }
    let pos = 0;
    const len = buf.length;
    while (pos < len) {
      switch (this.#state) {
        case State.Head: {
          const end = headEnd(buf, pos, MAX_HEAD_BYTES, REFUSALS);
          if (end === -1) {
            this.#partial = buf.subarray(pos);
            return;
          }
          // Parsed only when it differs from the last head remembered.
          const head = this.#last.parse(buf, pos, end, parseHead, freezeHead);
          pos = end + 4;
          this.#head(head);
          break;
        }
        case State.Body: {
          pos = this.#body.decode(buf, pos);
          if (this.#body.done) {
            this.#state = State.Done;
            this.#sink.onEnd();
          } else if (pos < len) {
            // A push-back, or an incomplete chunk line: kept for the next execute().
            this.#partial = buf.subarray(pos);
            return;
          }
          break;
        }
        case State.Done:
          this.trailingBytes = true;
          this.keepAlive = false;
          return;
        case State.Upgraded:
          this.#partial = buf.subarray(pos);
          return;
        case State.Idle:
          throw badResponse('data arrived while no request was in flight');
      }
    }
  }

  /** After onUpgrade: the bytes that followed the 101's head in the same read. */
  takeRest(): Buffer {
    const rest = this.#partial ?? EMPTY;
    this.#partial = undefined;
    return rest;
  }

  /** Whether bytes are held back, waiting for execute() with nothing new. */
  get holding(): boolean {
    return this.#partial !== undefined && this.#state !== State.Head;
  }

  #head(head: ParsedHead): void {
    const { status, http10, headers, contentLength, transferEncoding } = head;
    if (status < 200) {
      // 1xx interim responses (100 Continue, 103 Early Hints) precede the real one.
      if (status === 101) {
        if (!this.#upgrade) throw badResponse('101 Switching Protocols to a request that did not ask to upgrade');
        this.#state = State.Upgraded;
        this.keepAlive = false;
        this.#sink.onUpgrade(headers);
      }
      return;
    }
    if (this.#upgrade) {
      // An instance that declined to switch may have taken the socket from its
      // HTTP parser all the same (node:http does, once it listens for upgrades):
      // another request sent on it could wait forever.
      this.keepAlive = false;
    } else {
      this.keepAlive = head.persistent;
    }
    this.keepAliveHintMs = head.keepAliveHintMs;
    if (this.#noBody || status === 204 || status === 304) {
      this.#state = State.Done;
    } else if (transferEncoding !== undefined) {
      // Both framings, or a coding the router would have to pass on
      // undecoded without its header, are refused rather than forwarded: a
      // body sent on with the wrong length could smuggle a response to the
      // router's client (RFC 9112 6.3).
      if (contentLength !== -1) throw badResponse('both Transfer-Encoding and Content-Length');
      // An HTTP/1.0 message cannot be chunked: its framing is faulty (RFC 9112 6.1).
      if (http10) throw badResponse('Transfer-Encoding in an HTTP/1.0 response');
      if (transferEncoding.toLowerCase() !== 'chunked') throw badResponse('a Transfer-Encoding other than chunked');
      this.#body.chunked();
      this.#state = State.Body;
    } else if (contentLength !== -1) {
      this.#body.fixed(contentLength);
      this.#state = contentLength === 0 ? State.Done : State.Body;
    } else {
      this.#body.untilClose();
      this.#state = State.Body;
      this.keepAlive = false;
    }
    this.#sink.onHead(status, headers);
    if (this.#state === State.Done) this.#sink.onEnd();
  }
}

const EMPTY = Buffer.alloc(0);

/** A response head's meaning, whatever request it answers; shared by every response with the same head bytes. */
interface ParsedHead {
  readonly status: number;
  readonly http10: boolean;
  /** Frozen once remembered: the list then goes to every response that repeats the head. */
  readonly headers: readonly string[];
  /** -1 when there is none. */
  readonly contentLength: number;
  /** Every Transfer-Encoding line, joined; undefined when there is none. */
  readonly transferEncoding: string | undefined;
  /** Whether the instance's Connection header (or its HTTP version, without one) lets the connection carry another request. */
  readonly persistent: boolean;
  /** The instance's `Keep-Alive: timeout=N`, in ms. */
  readonly keepAliveHintMs: number | undefined;
}

/** A head's meaning, made safe to share between the responses that repeat it. */
function freezeHead(head: ParsedHead): ParsedHead {
  Object.freeze(head.headers);
  return Object.freeze(head);
}

/** Parses a response head (without its blank line); throws an UpstreamError on one that is not HTTP/1.x. */
function parseHead(head: string): ParsedHead {
  // Scanned by hand: this runs once per proxied request, and regexes and
  // per-line splits showed up in the router's profile.
  const statusEnd = head.indexOf('\r\n');
  const lineEnd = statusEnd === -1 ? head.length : statusEnd;
  const status = statusCode(head, lineEnd);
  // The reason phrase is not passed on, but a CR or LF in it would end the line early for a lenient reader.
  if (status === -1 || hasCrOrLf(head, 12, lineEnd)) throw badResponse(`bad status line ${JSON.stringify(head.slice(0, Math.min(lineEnd, 64)))}`);
  const http10 = head.charCodeAt(7) === 0x30;
  const headers: string[] = [];
  let contentLength = -1;
  let transferEncoding: string | undefined;
  let connection = '';
  let keepAliveHeader = '';
  let start = statusEnd === -1 ? head.length : statusEnd + 2;
  while (start < head.length) {
    let end = head.indexOf('\r\n', start);
    if (end === -1) end = head.length;
    const colon = head.indexOf(':', start);
    if (colon <= start || colon > end) throw badResponse(`bad header line ${JSON.stringify(head.slice(start, Math.min(end, start + 64)))}`);
    const first = head.charCodeAt(start);
    if (first === 0x20 || first === 0x09) throw badResponse('folded header lines are not allowed');
    let vs = colon + 1;
    let ve = end;
    while (vs < ve && isOws(head.charCodeAt(vs))) vs++;
    while (ve > vs && isOws(head.charCodeAt(ve - 1))) ve--;
    const name = head.slice(start, colon);
    const value = head.slice(vs, ve);
    if (!isToken(name)) throw badResponse(`bad header name ${JSON.stringify(name.slice(0, 64))}`);
    if (!isFieldValue(value)) throw badResponse(`header ${name} has a control character in its value`);
    start = end + 2;
    // Only framing and connection headers matter here; their lengths spare lower-casing the rest.
    switch (name.length) {
      case 14:
        if (name.toLowerCase() === 'content-length') {
          const n = parseContentLength(value);
          if (contentLength !== -1) {
            if (n !== contentLength) throw badResponse('conflicting Content-Length headers');
            // One Content-Length goes on, as one number: strict clients refuse lists and repeats.
            continue;
          }
          contentLength = n;
          headers.push(name, String(n));
          continue;
        }
        break;
      case 10: {
        const lower = name.toLowerCase();
        if (lower === 'connection') connection = connection === '' ? value : `${connection}, ${value}`;
        else if (lower === 'keep-alive') keepAliveHeader = value;
        break;
      }
      case 17:
        // Every Transfer-Encoding line counts: `gzip` then `chunked` is a gzip body, chunked.
        if (name.toLowerCase() === 'transfer-encoding') transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`;
        break;
    }
    headers.push(name, value);
  }
  let keepAliveHintMs: number | undefined;
  if (keepAliveHeader !== '') {
    const t = KEEP_ALIVE_TIMEOUT.exec(keepAliveHeader);
    if (t !== null) keepAliveHintMs = Number(t[1]) * 1000;
  }
  let persistent = !http10;
  if (connection !== '') {
    const conn = connection.toLowerCase();
    // Whole list members (RFC 9110 7.6.1), as the instance's own server reads them.
    persistent = http10 ? listHas(conn, 'keep-alive') : !listHas(conn, 'close');
  }
  return { status, http10, headers, contentLength, transferEncoding, persistent, keepAliveHintMs };
}

function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** The status of `HTTP/1.x NNN[ reason]`, or -1 when the line is not one. */
function statusCode(head: string, lineEnd: number): number {
  if (lineEnd < 12 || !head.startsWith('HTTP/1.')) return -1;
  const v = head.charCodeAt(7);
  if ((v !== 0x30 && v !== 0x31) || head.charCodeAt(8) !== 0x20) return -1;
  const a = head.charCodeAt(9);
  const b = head.charCodeAt(10);
  const c = head.charCodeAt(11);
  if (a < 0x31 || a > 0x39 || !isDigit(b) || !isDigit(c)) return -1;
  if (lineEnd > 12 && head.charCodeAt(12) !== 0x20) return -1;
  return (a - 0x30) * 100 + (b - 0x30) * 10 + (c - 0x30);
}

function hasCrOrLf(s: string, from: number, to: number): boolean {
  const cr = s.indexOf('\r', from);
  const lf = s.indexOf('\n', from);
  return (cr !== -1 && cr < to) || (lf !== -1 && lf < to);
}

/** 1*DIGIT; past 15 digits after the leading zeros a number could lose precision (RFC 9110 8.6). */
const CONTENT_LENGTH = /^0*\d{1,15}$/;

function parseContentLength(value: string): number {
  // "5, 5" (a list of equal values) is allowed by RFC 9110 8.6.
  const parts = value.includes(',') ? value.split(',').map(trimOws) : [value];
  let n = -1;
  for (const p of parts) {
    if (!CONTENT_LENGTH.test(p)) throw badResponse(`bad Content-Length ${JSON.stringify(value.slice(0, 32))}`);
    const v = Number(p);
    if (n !== -1 && v !== n) throw badResponse('conflicting Content-Length values');
    n = v;
  }
  return n;
}
