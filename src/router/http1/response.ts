// One response on a client connection of the router's HTTP/1.1 server. The
// method names follow node:http's ServerResponse where the router and the
// auth guard use them (statusCode, setHeader, writeHead, write, end,
// headersSent, destroy), so code written against either reads the same.
//
// The head is built as one string and goes out with the first body bytes in
// one write; framing (Content-Length as given, else chunked, or until close
// for HTTP/1.0 clients), Date and the connection headers are the server's.
import { STATUS_CODES } from 'node:http';
import type net from 'node:net';
import { isFieldValue, isToken } from './chars.ts';

/** What the response tells the code producing it. */
export interface ResponseWatcher {
  /** The client went away before the response was complete. */
  clientClosed(): void;
  /** A write() that returned false has drained. */
  drained(): void;
}

/** A client connection taken over after `101 Switching Protocols`. */
export interface DetachedSocket {
  /** Paused; its 'error' events are already handled. */
  socket: net.Socket;
  /** Bytes the client sent after the request head. */
  rest: Buffer;
}

/** The connection side of a response. */
export interface ResponseOwner {
  write(data: Buffer | string, more: boolean): boolean;
  /** The connection will close after this response (the client asked, or the server is stopping). */
  readonly closeAfter: boolean;
  /** The response is complete; `close` when the connection must not carry another. */
  responseDone(res: Http1Response, close: boolean): void;
  destroy(): void;
  /** Hands the connection over: the server forgets it. */
  detach(): DetachedSocket;
}

/** Small bodies are copied behind the head for one write; larger ones go by writev. */
const COPY_LIMIT = 4096;

let dateSecond = -1;
let dateValue = '';
function httpDate(): string {
  const now = Date.now();
  const s = Math.floor(now / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateValue = new Date(now).toUTCString();
  }
  return dateValue;
}

function invalid(code: string, message: string): Error {
  return Object.assign(new TypeError(message), { code });
}

/** Refuses what is not HTTP, with node:http's codes. */
function checkHeader(name: string, value: string): void {
  if (!isToken(name)) throw invalid('ERR_INVALID_HTTP_TOKEN', `Header name must be a valid HTTP token ["${name}"]`);
  if (!isFieldValue(value)) throw invalid('ERR_INVALID_CHAR', `Invalid character in header content ["${name}"]`);
}

/** The headers the server writes itself: a response's own are dropped or checked against its framing. */
function isServerHeader(name: string): boolean {
  switch (name.length) {
    case 4:
      return name.toLowerCase() === 'date';
    case 10: {
      const lower = name.toLowerCase();
      return lower === 'connection' || lower === 'keep-alive';
    }
    case 14:
      return name.toLowerCase() === 'content-length';
    case 17:
      return name.toLowerCase() === 'transfer-encoding';
  }
  return false;
}

/**
 * Response headers checked and written out as head lines, framing and
 * connection headers taken out (they are the server's). Throws, with
 * node:http's codes, on what is not HTTP. The list must not change
 * afterwards: `headers` is the caller's, kept as given.
 */
export class HeaderLines {
  /** The list they were made from. */
  readonly headers: readonly string[];
  readonly text: string;
  /** -1 when there is none. */
  readonly contentLength: number;
  readonly hasDate: boolean;
  /** A Connection header asked to close. */
  readonly close: boolean;

  constructor(headers: readonly string[]) {
    this.headers = headers;
    let text = '';
    let length = -1;
    let hasDate = false;
    let close = false;
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i];
      const value = headers[i + 1];
      checkHeader(name, value);
      // The framing and connection headers are the server's; names of other lengths need no lower-casing.
      switch (name.length) {
        case 4:
          if (name.toLowerCase() === 'date') hasDate = true;
          break;
        case 10: {
          const lower = name.toLowerCase();
          if (lower === 'connection') {
            if (value.toLowerCase().includes('close')) close = true;
            continue;
          }
          if (lower === 'keep-alive') continue;
          break;
        }
        case 14:
          if (name.toLowerCase() === 'content-length') {
            if (!/^\d{1,15}$/.test(value) || (length !== -1 && Number(value) !== length)) {
              throw invalid('ERR_HTTP_INVALID_HEADER_VALUE', `Invalid value "${value}" for header "Content-Length"`);
            }
            if (length !== -1) continue;
            length = Number(value);
          }
          break;
        case 17:
          if (name.toLowerCase() === 'transfer-encoding') continue;
          break;
      }
      text += `${name}: ${value}\r\n`;
    }
    this.text = text;
    this.contentLength = length;
    this.hasDate = hasDate;
    this.close = close;
  }
}

export class Http1Response {
  readonly #owner: ResponseOwner;
  readonly #headRequest: boolean;
  readonly #http10: boolean;
  readonly #keepAliveLine: string;
  /** The connection closes after this response. */
  #close = false;
  statusCode = 200;
  headersSent = false;
  /** end() has been called. */
  finished = false;
  watcher: ResponseWatcher | undefined = undefined;
  #pending: string[] | undefined = undefined;
  #head = '';
  #noBody = false;
  #chunked = false;
  /** Bytes a Content-Length body still owes; -1 when not framed by length. */
  #owed = -1;
  /** The connection answered the request itself (abandon()): whatever the handler writes goes nowhere. */
  #abandoned = false;

  constructor(owner: ResponseOwner, headRequest: boolean, http10: boolean, keepAliveLine: string) {
    this.#owner = owner;
    this.#headRequest = headRequest;
    this.#http10 = http10;
    this.#keepAliveLine = keepAliveLine;
  }

  /** Sets a header the head will carry; a later writeHead() header of the same name replaces it. */
  setHeader(name: string, value: string | number): this {
    if (this.#abandoned) return this;
    if (this.headersSent) throw invalid('ERR_HTTP_HEADERS_SENT', 'Cannot set headers after they are sent to the client');
    const lower = name.toLowerCase();
    const p = this.#pending ?? [];
    for (let i = 0; i < p.length; i += 2) {
      if (p[i].toLowerCase() === lower) {
        p.splice(i, 2);
        break;
      }
    }
    p.push(name, String(value));
    this.#pending = p;
    return this;
  }

  /** Headers as name/value pairs; repeated names (Set-Cookie) are kept as they are. */
  writeHead(status: number, headers?: readonly string[]): this {
    if (this.#abandoned) return this;
    this.#checkStart(status);
    let all = headers ?? [];
    if (this.#pending !== undefined) all = mergePending(this.#pending, all);
    this.#writeHead(status, new HeaderLines(all), '');
    return this;
  }

  /**
   * writeHead() with `lines` checked and written beforehand (HeaderLines),
   * then `name: value`: the proxy's path, where one instance's responses
   * repeat the same headers and only the request id changes. `name` may not
   * be one of the server's own (framing, connection, Date).
   */
  writeHeadWith(status: number, lines: HeaderLines, name: string, value: string): this {
    if (this.#abandoned) return this;
    this.#checkStart(status);
    if (isServerHeader(name)) throw invalid('ERR_HTTP_INVALID_HEADER_VALUE', `${name} cannot be written with writeHeadWith(): it is the server's`);
    const pending = this.#pending;
    // A pending header of the same name is replaced, as in writeHead(); others are merged the long way.
    if (pending !== undefined && !(pending.length === 2 && pending[0].toLowerCase() === name.toLowerCase())) return this.writeHead(status, [...lines.headers, name, value]);
    checkHeader(name, value);
    this.#writeHead(status, lines, `${name}: ${value}\r\n`);
    return this;
  }

  #checkStart(status: number): void {
    if (this.headersSent) throw invalid('ERR_HTTP_HEADERS_SENT', 'Cannot write headers after they are sent to the client');
    if (!Number.isInteger(status) || status < 200 || status > 999) throw invalid('ERR_HTTP_INVALID_STATUS_CODE', `Invalid status code: ${status}`);
  }

  #writeHead(status: number, lines: HeaderLines, more: string): void {
    // Asked now, not at the start: the server may have begun stopping while the answer was prepared.
    this.#close = this.#owner.closeAfter || lines.close;
    let text = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n${lines.text}${more}`;
    const length = lines.contentLength;
    this.#noBody = this.#headRequest || status === 204 || status === 304;
    if (!this.#noBody) {
      if (length !== -1) this.#owed = length;
      else if (this.#http10) this.#close = true;
      else {
        this.#chunked = true;
        text += 'Transfer-Encoding: chunked\r\n';
      }
    }
    if (!lines.hasDate) text += `Date: ${httpDate()}\r\n`;
    if (this.#close) text += 'Connection: close\r\n';
    else {
      if (this.#http10) text += 'Connection: keep-alive\r\n';
      text += this.#keepAliveLine;
    }
    this.#head = `${text}\r\n`;
    this.statusCode = status;
    this.headersSent = true;
  }

  /**
   * Answers `101 Switching Protocols` with exactly these headers (Upgrade and
   * Connection among them: they are the answer's meaning here) and hands the
   * connection over to the caller. Only for a request with `upgrade` set.
   */
  switchProtocols(headers: string[]): DetachedSocket {
    if (this.headersSent) throw invalid('ERR_HTTP_HEADERS_SENT', 'Cannot write headers after they are sent to the client');
    let text = 'HTTP/1.1 101 Switching Protocols\r\n';
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i];
      const value = headers[i + 1];
      checkHeader(name, value);
      text += `${name}: ${value}\r\n`;
    }
    this.statusCode = 101;
    this.headersSent = true;
    this.finished = true;
    this.watcher = undefined;
    this.#owner.write(`${text}\r\n`, false);
    return this.#owner.detach();
  }

  /** Returns false when the client is not keeping up; the watcher's drained() follows. */
  write(chunk: Buffer | string): boolean {
    if (this.#abandoned) return true;
    if (this.finished) throw invalid('ERR_STREAM_WRITE_AFTER_END', 'write after end');
    if (!this.headersSent) this.writeHead(this.statusCode);
    return this.#send(typeof chunk === 'string' ? Buffer.from(chunk) : chunk, false);
  }

  end(chunk?: Buffer | string): void {
    if (this.finished || this.#abandoned) return;
    if (!this.headersSent) this.writeHead(this.statusCode);
    this.finished = true;
    const body = chunk === undefined ? undefined : typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.#send(body, true);
    // A body shorter than its Content-Length leaves the client waiting for the rest: only a close tells it.
    const short = this.#owed > 0;
    this.#owner.responseDone(this, this.#close || short);
  }

  /**
   * The connection takes the request back before anything of this response
   * went out (a malformed body it answers with a 400 of its own); the handler
   * may go on writing, and nothing it writes reaches the client.
   */
  abandon(): void {
    this.#abandoned = true;
    this.watcher = undefined;
  }

  /** Cuts the connection: the client sees the response is incomplete. Once the response is complete, does nothing. */
  destroy(): void {
    if (this.finished || this.#abandoned) return;
    this.finished = true;
    this.#owner.destroy();
  }

  #send(body: Buffer | undefined, last: boolean): boolean {
    const head = this.#head;
    this.#head = '';
    if (this.#noBody || body === undefined || body.length === 0) {
      let text = head;
      if (last && this.#chunked && !this.#noBody) text += '0\r\n\r\n';
      return text === '' ? true : this.#owner.write(text, false);
    }
    if (this.#owed !== -1) {
      if (body.length > this.#owed) throw invalid('ERR_HTTP_CONTENT_LENGTH_MISMATCH', `Response body's content-length of ${this.#owed + body.length} byte(s) does not match the content-length of ${this.#owed} byte(s) set in header`);
      this.#owed -= body.length;
    }
    if (this.#chunked) {
      const frame = `${head}${body.length.toString(16)}\r\n`;
      this.#owner.write(frame, true);
      this.#owner.write(body, true);
      return this.#owner.write(last ? '\r\n0\r\n\r\n' : '\r\n', false);
    }
    if (head === '') return this.#owner.write(body, false);
    if (body.length <= COPY_LIMIT) {
      const headLength = head.length;
      const out = Buffer.allocUnsafe(headLength + body.length);
      out.write(head, 0, 'latin1');
      body.copy(out, headLength);
      return this.#owner.write(out, false);
    }
    this.#owner.write(head, true);
    return this.#owner.write(body, false);
  }
}

/** setHeader() values first, minus any name the writeHead() list also has. */
function mergePending(pending: string[], headers: readonly string[]): string[] {
  if (headers.length === 0) return pending;
  const given = new Set<string>();
  for (let i = 0; i < headers.length; i += 2) given.add(headers[i].toLowerCase());
  const out: string[] = [];
  for (let i = 0; i < pending.length; i += 2) if (!given.has(pending[i].toLowerCase())) out.push(pending[i], pending[i + 1]);
  for (const h of headers) out.push(h);
  return out;
}
