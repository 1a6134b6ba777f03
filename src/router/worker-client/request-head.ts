// The request line and header block for one request, checked before any
// connection is taken for it, so a request that cannot be sent costs nothing.
import { isFieldValue, isTarget, isToken } from '../http1/chars.ts';
import { UpstreamError } from './errors.ts';
import type { UpstreamRequest } from './types.ts';

export interface RequestHead {
  /** Written as latin1. */
  text: string;
  /** The body goes chunked: it has no Content-Length among the headers. */
  chunked: boolean;
}

/** Head lines of each UpstreamRequest.fixed list, or why it cannot be sent: made once per list. */
const linesByList = new WeakMap<readonly string[], { lines: string } | { refused: string }>();

function fixedLines(pairs: readonly string[]): string | UpstreamError {
  let made = linesByList.get(pairs);
  if (made === undefined) {
    let lines = '';
    for (let i = 0; i < pairs.length && made === undefined; i += 2) {
      const bad = badHeader(pairs[i], pairs[i + 1]);
      if (bad !== undefined) made = { refused: bad.message };
      else lines += `${pairs[i]}: ${pairs[i + 1]}\r\n`;
    }
    made ??= { lines };
    linesByList.set(pairs, made);
  }
  // Each request that cannot be sent gets an error of its own.
  return 'lines' in made ? made.lines : new UpstreamError('UPSTREAM_BAD_REQUEST', made.refused);
}

function badHeader(name: string, value: string): UpstreamError | undefined {
  // The router's server has already refused such bytes from clients; this catches any the router itself might
  // put together (the head is written as latin1, so anything above U+00FF would lose its high byte).
  if (!isToken(name)) return new UpstreamError('UPSTREAM_BAD_REQUEST', `header name ${JSON.stringify(name.slice(0, 64))} is not a token`);
  if (!isFieldValue(value)) return new UpstreamError('UPSTREAM_BAD_REQUEST', `header ${JSON.stringify(name)} has a control character in its value`);
  return undefined;
}

export function requestHead(req: UpstreamRequest, host: string): RequestHead | UpstreamError {
  if (!isTarget(req.path)) return new UpstreamError('UPSTREAM_BAD_REQUEST', 'the request path has a space or control character in it');
  const fixed = req.fixed === undefined ? '' : fixedLines(req.fixed);
  if (fixed instanceof UpstreamError) return fixed;
  let head = `${req.method} ${req.path} HTTP/1.1\r\nHost: ${host}\r\n${fixed}`;
  const h = req.headers;
  let framed = false;
  for (let i = 0; i < h.length; i += 2) {
    const name = h[i];
    const value = h[i + 1];
    const bad = badHeader(name, value);
    if (bad !== undefined) return bad;
    if (name.length === 14 && name.toLowerCase() === 'content-length') framed = true;
    head += `${name}: ${value}\r\n`;
  }
  if (req.upgrade !== undefined) {
    if (req.body !== null) return new UpstreamError('UPSTREAM_BAD_REQUEST', 'an upgrade request cannot carry a body');
    if (!isFieldValue(req.upgrade)) return new UpstreamError('UPSTREAM_BAD_REQUEST', 'the Upgrade value has a control character in it');
    head += `Connection: Upgrade\r\nUpgrade: ${req.upgrade}\r\n`;
  }
  const chunked = req.body !== null && !framed;
  return { text: chunked ? `${head}Transfer-Encoding: chunked\r\n\r\n` : `${head}\r\n`, chunked };
}
