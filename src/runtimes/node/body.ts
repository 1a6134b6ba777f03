// Reading a request body in full, with a size cap, and parsing it by its
// content-type before the handler runs.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from './respond.ts';

export const EMPTY = Buffer.alloc(0);

/** Whether the request can have a body at all (HTTP/1.1 framing). */
export function hasBody(req: IncomingMessage): boolean {
  const cl = req.headers['content-length'];
  if (cl !== undefined) return cl !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

/**
 * The whole body, or undefined when the request is gone (client aborted) or
 * too large, in which case the answer has been sent already.
 */
export function readBody(req: IncomingMessage, res: ServerResponse, limit: number): Promise<Buffer | undefined> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    tooLarge(res, limit);
    return Promise.resolve(undefined);
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (value: Buffer | undefined) => {
      if (done) return;
      done = true;
      req.off('data', onData);
      resolve(value);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        tooLarge(res, limit);
        finish(undefined);
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => finish(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)));
    // An aborted upload ends in 'error' (ECONNRESET) and/or 'close' without 'end'.
    req.once('error', () => finish(undefined));
    req.once('close', () => finish(undefined));
  });
}

function tooLarge(res: ServerResponse, limit: number): void {
  // The rest of the upload is never read, so the connection cannot be reused.
  sendJson(res, 413, { error: `request body larger than ${limit} bytes` }, true);
}

export class BadBody extends Error {}

/** The media type of a content-type header, lowercased, without parameters. */
function mediaType(contentType: string): string {
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

/**
 * JSON for application/json (and +json), a string for text/* and urlencoded
 * forms, the Buffer for anything else, undefined when there is no body.
 * Throws BadBody for JSON that does not parse.
 */
export function parseBody(raw: Buffer, contentType: string | undefined): unknown {
  if (raw.length === 0) return undefined;
  if (contentType === undefined) return raw;
  const type = mediaType(contentType);
  if (type === 'application/json' || type.endsWith('+json')) {
    try {
      return JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw new BadBody(`request body is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (type.startsWith('text/') || type === 'application/x-www-form-urlencoded') return raw.toString('utf8');
  return raw;
}
