// Header handling for both directions of the proxy. One pass over the raw
// header list per message, classifying names through a lookup table, so the
// hot path never builds Node's lazily parsed `req.headers` object.

const FORWARD = 0;
const DROP = 1;
const HOST = 2;
const REQUEST_ID = 3;
const FORWARDED_FOR = 4;
const FORWARDED = 5;
const CONTENT_LENGTH = 6;
const TRANSFER_ENCODING = 7;
const CONNECTION = 8;
const TRACEPARENT = 9;

function table(entries: Record<string, number>): Record<string, number> {
  return Object.assign(Object.create(null), entries);
}

/** How request headers are classified; one table per router, chosen at start, so the per-header cost does not change. */
export type RequestClasses = Readonly<Record<string, number>>;

const REQUEST_CLASS = table({
  // Hop-by-hop (RFC 9110 7.6.1 and the ones proxies traditionally drop).
  'keep-alive': DROP,
  'proxy-connection': DROP,
  'proxy-authorization': DROP,
  te: DROP,
  trailer: DROP,
  upgrade: DROP,
  // The router answers `Expect: 100-continue` itself (node:http does).
  expect: DROP,
  // Set by the router from what it knows; a client must not forge them.
  'x-flint-full-url': DROP,
  'x-flint-function-name': DROP,
  'x-flint-function-namespace': DROP,
  'x-flint-function-uid': DROP,
  'x-flint-function-resourceversion': DROP,
  host: HOST,
  'x-flint-request-id': REQUEST_ID,
  'x-forwarded-for': FORWARDED_FOR,
  forwarded: FORWARDED,
  'x-forwarded-host': FORWARDED,
  'content-length': CONTENT_LENGTH,
  'transfer-encoding': TRANSFER_ENCODING,
  connection: CONNECTION,
});

// With authentication on, Authorization carries the caller's Flint token: a
// function that saw it could replay it (DESIGN.md §5, Trust).
const REQUEST_CLASS_NO_AUTHORIZATION: RequestClasses = table({ ...REQUEST_CLASS, authorization: DROP });

// With tracing on, the caller's `traceparent` is read (the router's span is
// its child) and replaced by the router's own; with tracing off it is an
// ordinary header and reaches the function as sent.
const TRACED: Record<string, number> = { traceparent: TRACEPARENT };

/** The classification table for a router that does, or does not, pass `Authorization` on to functions, and traces or not. */
export function requestClasses(opts: { forwardAuthorization: boolean; tracing?: boolean }): RequestClasses {
  const base = opts.forwardAuthorization ? REQUEST_CLASS : REQUEST_CLASS_NO_AUTHORIZATION;
  return opts.tracing === true ? table({ ...base, ...TRACED }) : base;
}

const RESPONSE_DROP = table({
  connection: 1,
  'keep-alive': 1,
  'proxy-connection': 1,
  'proxy-authenticate': 1,
  'transfer-encoding': 1,
  trailer: 1,
  upgrade: 1,
  // The router sets its own; a function's would contradict it.
  'x-flint-request-id': 1,
});

const RESPONSE_DROP_LENGTHS: boolean[] = [];
for (const name of Object.keys(RESPONSE_DROP)) RESPONSE_DROP_LENGTHS[name.length] = true;

const PARAMS_PREFIX = 'x-flint-params-';

export interface ScannedRequest {
  /** Client headers to forward, as name/value pairs; the router appends its own. */
  headers: string[];
  /** The Host header, '' when absent. */
  host: string;
  requestId: string | undefined;
  forwardedFor: string | undefined;
  /** Whether the client already sent `Forwarded` or `X-Forwarded-Host`. */
  forwarded: boolean;
  hasBody: boolean;
  /** The caller's `traceparent`, read only when tracing is on (two or more read as '', malformed). */
  traceparent: string | undefined;
}

const NO_TOKENS: string[] = [];

/** Connection options other than the usual ones name more hop-by-hop headers. */
function connectionTokens(value: string): string[] {
  if (value.length <= 10) {
    const v = value.toLowerCase();
    if (v === 'keep-alive' || v === 'close') return NO_TOKENS;
  }
  const out: string[] = [];
  for (const t of value.split(',')) {
    const tok = t.trim().toLowerCase();
    if (tok !== '' && tok !== 'close' && tok !== 'keep-alive') out.push(tok);
  }
  return out;
}

function dropNamed(headers: string[], names: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    if (!names.includes(headers[i].toLowerCase())) out.push(headers[i], headers[i + 1]);
  }
  return out;
}

export function scanRequest(raw: readonly string[], classes: RequestClasses = REQUEST_CLASS): ScannedRequest {
  let headers: string[] = [];
  let host = '';
  let requestId: string | undefined;
  let forwardedFor: string | undefined;
  let forwarded = false;
  let hasBody = false;
  let traceparent: string | undefined;
  let extraHop: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const lower = name.toLowerCase();
    const cls = classes[lower];
    if (cls === undefined) {
      // Parameters come only from the route; a client's would be trusted as ours.
      if (lower.startsWith(PARAMS_PREFIX)) continue;
      headers.push(name, raw[i + 1]);
      continue;
    }
    switch (cls) {
      case FORWARD:
        headers.push(name, raw[i + 1]);
        break;
      case HOST:
        host = raw[i + 1];
        break;
      case REQUEST_ID:
        requestId = raw[i + 1];
        break;
      case FORWARDED_FOR:
        forwardedFor = forwardedFor === undefined ? raw[i + 1] : `${forwardedFor}, ${raw[i + 1]}`;
        break;
      case FORWARDED:
        forwarded = true;
        headers.push(name, raw[i + 1]);
        break;
      case CONTENT_LENGTH:
        if (raw[i + 1] !== '0') hasBody = true;
        headers.push(name, raw[i + 1]);
        break;
      case TRANSFER_ENCODING:
        // The upstream connection picks its own framing.
        hasBody = true;
        break;
      case CONNECTION: {
        const toks = connectionTokens(raw[i + 1]);
        if (toks.length > 0) extraHop = extraHop === undefined ? toks : extraHop.concat(toks);
        break;
      }
      case TRACEPARENT:
        // Two would join into one list value, which is no valid traceparent: a new trace starts.
        traceparent = traceparent === undefined ? raw[i + 1] : '';
        break;
    }
  }
  if (extraHop !== undefined) headers = dropNamed(headers, extraHop);
  return { headers, host, requestId, forwardedFor, forwarded, hasBody, traceparent };
}

// Nearly every request names the same few hosts.
let lastHost = '';
let lastForwarded = '';

/** `Forwarded` needs a quoted string for anything that is not a token (ports, IPv6). */
export function forwardedHost(host: string): string {
  if (host === lastHost) return lastForwarded;
  const v = /^[A-Za-z0-9.-]+$/.test(host) ? `host=${host}` : `host="${host.replace(/["\\]/g, '\\$&')}"`;
  lastHost = host;
  lastForwarded = v;
  return v;
}

/** A function's response headers as name/value strings, minus hop-by-hop ones. */
export function endToEndHeaders(raw: readonly string[]): string[] {
  const out: string[] = [];
  let extraHop: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    // A name of a length no dropped header has needs no lower-casing.
    if (RESPONSE_DROP_LENGTHS[name.length] !== true) {
      out.push(name, raw[i + 1]);
      continue;
    }
    const lower = name.toLowerCase();
    if (RESPONSE_DROP[lower] !== undefined) {
      if (lower === 'connection') {
        const toks = connectionTokens(raw[i + 1]);
        if (toks.length > 0) extraHop = extraHop === undefined ? toks : extraHop.concat(toks);
      }
      continue;
    }
    out.push(name, raw[i + 1]);
  }
  return extraHop === undefined ? out : dropNamed(out, extraHop);
}

/**
 * A 101's headers for the client: the function's, as endToEndHeaders() gives
 * them, then the switch itself (on a 101, Upgrade and Connection are the
 * answer's meaning, not hop-by-hop details). Undefined when the function
 * named no protocol to switch to.
 */
export function switchHeaders(raw: readonly string[], requestIdName: string, requestId: string): string[] | undefined {
  let upgrade = '';
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === 7 && raw[i].toLowerCase() === 'upgrade') upgrade = raw[i + 1];
  if (upgrade === '') return undefined;
  const out = endToEndHeaders(raw);
  out.push(requestIdName, requestId);
  // A 101 has no body to frame (RFC 9110 8.6).
  const headers: string[] = [];
  for (let i = 0; i < out.length; i += 2) if (out[i].toLowerCase() !== 'content-length') headers.push(out[i], out[i + 1]);
  headers.push('Connection', 'Upgrade', 'Upgrade', upgrade);
  return headers;
}
