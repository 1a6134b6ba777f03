// Writing responses: the worker's own JSON answers, and turning what a handler
// returned into status, headers and body.
import type { ServerResponse } from 'node:http';
import { pipeline, type Readable } from 'node:stream';

const JSON_TYPE = 'application/json; charset=utf-8';
// Not text/html as Express would: a handler that echoes input as a string
// must not become an HTML injection just because it set no content-type.
const TEXT_TYPE = 'text/plain; charset=utf-8';
const BINARY_TYPE = 'application/octet-stream';

export function sendJson(res: ServerResponse, status: number, body: unknown, close = false): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('content-type', JSON_TYPE);
  res.setHeader('content-length', Buffer.byteLength(text));
  if (close) res.setHeader('connection', 'close');
  res.end(text);
}

/** A mistake in what the handler returned: reported like a thrown error. */
export class ResultError extends Error {}

function isReadable(x: unknown): x is Readable {
  return typeof (x as Readable | null)?.pipe === 'function' && typeof (x as Readable).on === 'function';
}

function statusOf(raw: unknown): number {
  if (raw === undefined || raw === null) return 200;
  const n = typeof raw === 'string' ? Number(raw) : raw;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 100 || n > 999) {
    throw new ResultError(`invalid status ${JSON.stringify(raw)}: expected an integer from 100 to 999`);
  }
  return n;
}

function setHeaders(res: ServerResponse, headers: unknown): void {
  if (headers === undefined || headers === null) return;
  if (typeof headers !== 'object') throw new ResultError('headers must be an object of header names to values');
  for (const name of Object.keys(headers)) {
    const value = (headers as Record<string, unknown>)[name];
    if (value === undefined || value === null) continue;
    try {
      res.setHeader(name, Array.isArray(value) ? value.map(String) : typeof value === 'number' ? value : String(value));
    } catch (err) {
      throw new ResultError(`invalid header '${name}': ${(err as Error).message}`);
    }
  }
}

/**
 * Sends `{status, body, headers}` as the handler returned it (or passed it to
 * the callback). Throws ResultError, before anything is written, when the
 * result is unusable.
 */
export function sendResult(res: ServerResponse, result: unknown): void {
  if (result === null || typeof result !== 'object') {
    throw new ResultError(
      `the handler returned ${result === null ? 'null' : typeof result}: return {status, body, headers} or write to context.response`,
    );
  }
  const r = result as { status?: unknown; body?: unknown; headers?: unknown };
  if (!('status' in r) && !('body' in r) && !('headers' in r)) {
    throw new ResultError('the handler returned an object without status, body or headers: return {status, body, headers}');
  }
  const status = statusOf(r.status);
  const body = r.body;
  let payload: string | Uint8Array | undefined;
  let defaultType: string | undefined;
  if (body === undefined || body === null) {
    payload = undefined;
  } else if (typeof body === 'string') {
    payload = body;
    defaultType = TEXT_TYPE;
  } else if (body instanceof Uint8Array) {
    payload = body;
    defaultType = BINARY_TYPE;
  } else if (isReadable(body)) {
    setHeaders(res, r.headers);
    if (!res.hasHeader('content-type')) res.setHeader('content-type', BINARY_TYPE);
    res.statusCode = status;
    pipeline(body, res, (err) => {
      // The status line is gone already; a broken connection is all that can tell the client.
      if (err && !res.destroyed) res.destroy(err);
    });
    return;
  } else {
    payload = JSON.stringify(body);
    defaultType = JSON_TYPE;
  }
  setHeaders(res, r.headers);
  if (defaultType !== undefined && !res.hasHeader('content-type')) res.setHeader('content-type', defaultType);
  res.statusCode = status;
  if (payload === undefined) {
    res.setHeader('content-length', 0);
    res.end();
    return;
  }
  res.setHeader('content-length', typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength);
  res.end(payload);
}

/**
 * A handler failed: the stack goes to stderr (the function's log); the client
 * gets a short JSON 500, or a cut connection when the response had begun.
 */
export function sendFunctionError(res: ServerResponse, err: unknown): void {
  const e = err as Error | undefined;
  const message = e instanceof Error ? e.message : String(err);
  process.stderr.write(`function error: ${e instanceof Error ? (e.stack ?? message) : message}\n`);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // Headers the handler set before failing must not leak into the error answer.
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  sendJson(res, 500, { error: 'function error', message });
}
