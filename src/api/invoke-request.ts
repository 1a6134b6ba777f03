// What the dashboard asks at POST /v1/namespaces/{ns}/functions/{name}/invoke
// (the control plane calls the function through the router for it, as
// `flint fn test` does), and what it gets back. Checked loudly, naming the
// field: headers and the sub-path end up in a request the server sends.
import { type Static, Type } from '@sinclair/typebox';
import { FlintError, invalid } from './errors.ts';
import { HTTP_METHODS } from './names.ts';

/** Largest request body the dashboard may send, and largest response body it is shown (the rest is cut, and said so). */
export const MAX_INVOKE_BODY = 1024 * 1024;
const MAX_HEADERS = 64;
const MAX_QUERY = 64;
// RFC 9110's token.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/;
const BAD_VALUE = /[\0\r\n]/;
/** The connection's own headers are the server's to write, not the caller's. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'expect', 'proxy-connection']);
/** The methods a test call takes: fetch, which sends it, refuses CONNECT and TRACE. */
const INVOKE_METHODS: readonly string[] = HTTP_METHODS.filter((m) => m !== 'CONNECT' && m !== 'TRACE');
/** A sub-path of the function's: path characters only, no dot segments (the router would see them, not the function). */
const SUBPATH = /^(?:\/[-A-Za-z0-9._~!$&'()*+,;=:@%]*)*$/;

export const InvokeRequestSchema = Type.Object(
  {
    method: Type.Union(INVOKE_METHODS.map((m) => Type.Literal(m))),
    path: Type.Optional(Type.String({ maxLength: 2048, description: 'Sub-path the function sees (default /)' })),
    headers: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'Request headers' })),
    query: Type.Optional(Type.Array(Type.Tuple([Type.String(), Type.String()]), { description: 'Query parameters, in order, as [name, value] pairs' })),
    body: Type.Optional(Type.String({ description: 'Request body (text)' })),
  },
  { additionalProperties: false },
);

export const InvokeResultSchema = Type.Object({
  status: Type.Integer(),
  headers: Type.Record(Type.String(), Type.String()),
  body: Type.String({ description: 'The response body as UTF-8 text' }),
  truncated: Type.Boolean({ description: `true: the body was longer than ${MAX_INVOKE_BODY} bytes and is cut there` }),
  durationMs: Type.Number({ description: 'From sending the request to the end of the response' }),
  requestId: Type.Optional(Type.String({ description: "The router's X-Flint-Request-Id: the function log's lines of this call carry it" })),
});

export type InvokeResult = Static<typeof InvokeResultSchema>;

export interface InvokeRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  query: Array<[string, string]>;
  body: string | undefined;
}

function stringRecord(value: unknown, field: string): Record<string, string> {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(field, 'must be an object of names to strings');
  const out: Record<string, string> = {};
  const entries = Object.entries(value);
  if (entries.length > MAX_HEADERS) throw invalid(field, `has more than ${MAX_HEADERS} headers`);
  for (const [k, v] of entries) {
    if (!HEADER_NAME.test(k)) throw invalid(`${field}.${k}`, `'${k}' is not a valid HTTP header name`);
    if (RESERVED_HEADERS.has(k.toLowerCase())) throw invalid(`${field}.${k}`, `${k} is set by the connection, not by the caller`);
    if (typeof v !== 'string') throw invalid(`${field}.${k}`, 'must be a string');
    if (BAD_VALUE.test(v)) throw invalid(`${field}.${k}`, 'has a line break or NUL in its value');
    out[k] = v;
  }
  return out;
}

/** The request, normalized; throws FLINT_ERR_VALIDATION naming the first bad field. */
export function validateInvokeRequest(body: unknown): InvokeRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new FlintError('FLINT_ERR_VALIDATION', 'the request body must be a JSON object');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (!Object.hasOwn(InvokeRequestSchema.properties, k)) throw invalid(k, 'unknown field');
  const method = b.method;
  if (method === undefined) throw invalid('method', 'is required: the HTTP method to call the function with');
  if (typeof method !== 'string' || !INVOKE_METHODS.includes(method)) {
    throw invalid('method', `${JSON.stringify(method)} is not a method to call a function with: use one of ${INVOKE_METHODS.join(', ')}`);
  }
  if (b.path !== undefined && typeof b.path !== 'string') throw invalid('path', 'must be a string');
  let path: string = b.path === undefined || b.path === '' ? '/' : b.path;
  if (!path.startsWith('/')) path = `/${path}`;
  if (path.length > 2048 || !SUBPATH.test(path) || path.split('/').some((seg) => seg === '.' || seg === '..' || /^%2e/i.test(seg))) {
    throw invalid('path', 'must be a path of the function (letters, digits, -._~ and the like), with no . or .. segment');
  }
  const headers = stringRecord(b.headers, 'headers');
  const query: Array<[string, string]> = [];
  if (b.query !== undefined) {
    if (!Array.isArray(b.query)) throw invalid('query', 'must be a list of [name, value] pairs');
    if (b.query.length > MAX_QUERY) throw invalid('query', `has more than ${MAX_QUERY} parameters`);
    b.query.forEach((pair, i) => {
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string' || pair[0] === '') {
        throw invalid(`query[${i}]`, 'must be a [name, value] pair of strings, the name not empty');
      }
      query.push([pair[0], pair[1]]);
    });
  }
  if (b.body !== undefined && typeof b.body !== 'string') throw invalid('body', 'must be a string');
  if (typeof b.body === 'string' && Buffer.byteLength(b.body) > MAX_INVOKE_BODY) throw invalid('body', `is larger than ${MAX_INVOKE_BODY} bytes`);
  if (b.body !== undefined && (method === 'GET' || method === 'HEAD') && b.body !== '') throw invalid('body', `a ${method} request has no body`);
  return { method, path, headers, query, body: b.body === '' ? undefined : (b.body as string | undefined) };
}
