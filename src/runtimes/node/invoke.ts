// One request to the user's handler: build the context, call the handler in
// any of its forms, and turn what it returns (or throws) into a response.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Handler } from './loader.ts';

export const MAX_BODY_BYTES = 50 * 1024 * 1024;

export interface Context {
  request: {
    method: string;
    url: string;
    path: string;
    headers: IncomingMessage['headers'];
    query: Record<string, string | string[]>;
    body: unknown;
    rawBody: Buffer;
  };
  response: ServerResponse;
  log: Console;
}

class BodyError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new BodyError(413, `request body over ${MAX_BODY_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseBody(raw: Buffer, contentType: string | undefined): unknown {
  if (raw.length === 0) return undefined;
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/json' || type.endsWith('+json')) {
    try {
      return JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw new BodyError(400, `request body is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (type.startsWith('text/') || type === 'application/x-www-form-urlencoded') return raw.toString('utf8');
  return raw;
}

function parseQuery(search: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  if (!search) return out;
  for (const [k, v] of new URLSearchParams(search)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendResult(res: ServerResponse, result: unknown): void {
  if (res.headersSent || res.writableEnded) return;
  const r = (result ?? {}) as { status?: unknown; body?: unknown; headers?: Record<string, string> };
  const status = typeof r.status === 'number' ? r.status : 200;
  const headers: Record<string, string | number> = { ...(r.headers ?? {}) };
  const lower = new Set(Object.keys(headers).map((h) => h.toLowerCase()));
  let payload: string | Uint8Array;
  const body = r.body;
  if (body === undefined || body === null) payload = '';
  else if (typeof body === 'string' || body instanceof Uint8Array) payload = body;
  else {
    payload = JSON.stringify(body);
    if (!lower.has('content-type')) headers['content-type'] = 'application/json';
  }
  if (!lower.has('content-type') && typeof payload === 'string' && payload.length > 0) headers['content-type'] = 'text/plain; charset=utf-8';
  headers['content-length'] = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength;
  res.writeHead(status, headers);
  res.end(payload);
}

function fail(res: ServerResponse, err: unknown): void {
  const e = err as Error;
  console.error(`function error: ${e?.stack ?? String(err)}`);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, 500, { error: 'function error', message: e?.message ?? String(err) });
}

export async function invoke(handler: Handler, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  let raw: Buffer;
  let body: unknown;
  try {
    raw = await readBody(req);
    body = parseBody(raw, req.headers['content-type']);
  } catch (err) {
    if (err instanceof BodyError) sendJson(res, err.status, { error: err.message });
    else res.destroy();
    return;
  }
  const context: Context = {
    request: {
      method: req.method ?? 'GET',
      url,
      path: q < 0 ? url : url.slice(0, q),
      headers: req.headers,
      query: parseQuery(q < 0 ? '' : url.slice(q + 1)),
      body,
      rawBody: raw,
    },
    response: res,
    log: console,
  };
  try {
    if (handler.length >= 2) {
      // The callback form: (context, callback(status, body, headers)).
      await new Promise<void>((resolve, reject) => {
        let settled = false;
        const callback = (status: unknown, cbBody?: unknown, headers?: Record<string, string>) => {
          if (settled) return;
          settled = true;
          sendResult(res, { status, body: cbBody, headers });
          resolve();
        };
        try {
          const maybe = handler(context, callback) as Promise<unknown> | undefined;
          if (maybe && typeof (maybe as Promise<unknown>).then === 'function') {
            maybe.then((v) => {
              if (!settled && v !== undefined) {
                settled = true;
                sendResult(res, v);
                resolve();
              }
            }, reject);
          }
        } catch (err) {
          reject(err);
        }
      });
      return;
    }
    const result = await handler(context);
    if (res.headersSent || res.writableEnded) return;
    if (result === undefined) throw new Error('the handler returned nothing: return {status, body, headers} or write to context.response');
    sendResult(res, result);
  } catch (err) {
    fail(res, err);
  }
}
