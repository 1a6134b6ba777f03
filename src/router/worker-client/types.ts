// The worker client's small interface: what the proxy hands it and what it
// calls back. Shaped like undici's dispatch handler (one object per request,
// no per-request closures) but with headers as strings, which is what the
// router forwards and writes anyway.
import type net from 'node:net';
import type { Readable } from 'node:stream';

export interface UpstreamRequest {
  method: string;
  /** Path and query, as sent on the request line. */
  path: string;
  /**
   * Name/value pairs. Host, Connection and Transfer-Encoding are the
   * client's own business and must not be among them; a Content-Length here
   * frames `body`, which is sent chunked otherwise.
   */
  headers: string[];
  /**
   * Name/value pairs sent after Host and before `headers`: a list many
   * requests share unchanged (a function's own headers), so it is checked
   * and written out once per list, not per request.
   */
  fixed?: readonly string[];
  body: Readable | null;
  /** Bounds the wait for the response head and any silence inside the body; 0 for none. */
  timeoutMs: number;
  /**
   * Asks the instance to switch to this protocol (sent as `Upgrade`, with
   * `Connection: Upgrade`); only with no body. A 101 then goes to onUpgrade.
   */
  upgrade?: string | undefined;
}

export interface ResponseHandler {
  /** Called once the request is under way; `abort` ends it with onError(err). */
  onStart(abort: (err: Error) => void): void;
  /**
   * The final response head (1xx interim responses are not passed on). May
   * return the longest silence to allow inside this response's body instead
   * of `timeoutMs` (a stream's idle limit).
   */
  onHeaders(status: number, headers: readonly string[], resume: () => void): number | undefined;
  /**
   * Return false to stop reading from the instance until `resume` is called.
   * `last` says the chunk ends the body and onComplete follows before any
   * I/O, so it may be held and written together with the end.
   */
  onData(chunk: Buffer, last: boolean): boolean;
  onComplete(): void;
  /**
   * The instance switched protocols (only for a request with `upgrade`): the
   * connection leaves the pool and is the handler's, paused, with `rest`
   * (bytes after the 101's head) already read from it. Ends the request
   * like onComplete; the handler owns the socket's 'error' events from now.
   */
  onUpgrade?(headers: readonly string[], socket: net.Socket, rest: Buffer): void;
  /** Exactly one of onComplete, onUpgrade and onError is called, once. */
  onError(err: Error): void;
}
