// The router's own answers. Every error body is the same JSON shape, so a
// caller can tell a router error (it has `code`) from a function's response.
import type { Http1Response } from './http1/response.ts';
import { type ErrorCode, ErrorCodes } from '../api/errors.ts';

export const REQUEST_ID_HEADER = 'X-Flint-Request-Id';

export function sendError(res: Http1Response, code: ErrorCode, message: string, requestId: string, allow?: string, retryAfterSeconds?: number): number {
  const status = ErrorCodes[code].status;
  if (res.headersSent) {
    // Too late for a status: cut the response so the client sees it is incomplete.
    res.destroy();
    return status;
  }
  const body = JSON.stringify(retryAfterSeconds === undefined ? { code, message, requestId } : { code, message, requestId, retryAfterSeconds });
  const headers = [
    'Content-Type',
    'application/json',
    'Content-Length',
    String(Buffer.byteLength(body)),
    'X-Content-Type-Options',
    'nosniff',
    REQUEST_ID_HEADER,
    requestId,
  ];
  if (allow !== undefined) headers.push('Allow', allow);
  if (retryAfterSeconds !== undefined) headers.push('Retry-After', String(retryAfterSeconds));
  res.writeHead(status, headers);
  res.end(body);
  return status;
}

export function sendEmpty(res: Http1Response, status: number, requestId: string): void {
  res.writeHead(status, ['Content-Length', '0', REQUEST_ID_HEADER, requestId]);
  res.end();
}
