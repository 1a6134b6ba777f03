// One request to the user's handler: read and parse the body, call the
// handler in its async or callback form, send what it returns, or a 500 when
// it throws, rejects or returns nothing.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BadBody, EMPTY, hasBody, parseBody, readBody } from './body.ts';
import { type Context, createContext } from './context.ts';
import type { Handler } from './loader.ts';
import { sendFunctionError, sendJson, sendResult } from './respond.ts';

/** True once the handler took over the response itself (streaming). */
function touched(res: ServerResponse): boolean {
  return res.headersSent || res.writableEnded || res.destroyed;
}

/** The callback form `(context, callback)`, where `callback(status, body, headers)`. */
function callWithCallback(handler: Handler, context: Context): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const callback = (status?: unknown, body?: unknown, headers?: unknown) => resolve({ status, body, headers });
    // A handler that streams and never calls back must not leave this pending forever.
    context.response.once('close', () => resolve(undefined));
    try {
      const r = handler(context, callback) as PromiseLike<unknown> | undefined;
      if (r !== null && typeof r === 'object' && typeof r.then === 'function') {
        r.then((v) => {
          if (v !== undefined) resolve(v);
        }, reject);
      }
    } catch (err) {
      reject(err);
    }
  });
}

export async function invoke(handler: Handler, req: IncomingMessage, res: ServerResponse, maxBodyBytes: number): Promise<void> {
  let raw: Buffer = EMPTY;
  if (hasBody(req)) {
    const read = await readBody(req, res, maxBodyBytes);
    if (read === undefined) return;
    raw = read;
  }
  let body: unknown;
  try {
    body = parseBody(raw, req.headers['content-type']);
  } catch (err) {
    if (!(err instanceof BadBody)) throw err;
    sendJson(res, 400, { error: err.message });
    return;
  }
  const context = createContext(req, res, body, raw);
  try {
    const result = handler.length >= 2 ? await callWithCallback(handler, context) : await handler(context);
    if (touched(res)) return;
    if (result === undefined) {
      throw new Error('the handler returned nothing: return {status, body, headers} or write to context.response');
    }
    sendResult(res, result);
  } catch (err) {
    if (res.destroyed) {
      // The client is gone; the error still belongs in the function's log.
      process.stderr.write(`function error (client gone): ${(err as Error)?.stack ?? String(err)}\n`);
      return;
    }
    sendFunctionError(res, err);
  }
}
