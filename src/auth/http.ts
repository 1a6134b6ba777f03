// Shared HTTP pieces of the router-side auth: reading the bearer token and
// answering with the JSON `{message, statusCode}` bodies DESIGN.md §5 fixes.

/**
 * What the router-side auth reads of a request. node:http's IncomingMessage
 * has it, and so does the request of the router's own HTTP/1.1 server.
 */
export interface AuthRequest {
  readonly method?: string;
  readonly url?: string;
  readonly headers: { readonly [name: string]: string | string[] | undefined; readonly authorization?: string; readonly 'content-length'?: string };
  readonly socket: { readonly remoteAddress?: string };
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** What the router-side auth does to a response (node:http's ServerResponse, or the router's own). */
export interface AuthResponse {
  statusCode: number;
  readonly headersSent: boolean;
  setHeader(name: string, value: string): unknown;
  end(body?: Buffer): unknown;
  destroy(): unknown;
}

/**
 * The token of an `Authorization: Bearer <token>` value, or undefined when
 * the header is absent, uses another scheme, or carries no token. The scheme
 * name is matched without regard to case (RFC 7235 §2.1).
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length < 8) return undefined;
  // Fast path for the canonical spelling, which is what clients send.
  let rest: string;
  if (header.startsWith('Bearer ')) rest = header.slice(7);
  else if (header.slice(0, 7).toLowerCase() === 'bearer ') rest = header.slice(7);
  else return undefined;
  const token = rest.trim();
  if (token === '' || token.includes(' ')) return undefined;
  return token;
}

export interface JsonBody {
  readonly bytes: Buffer;
  readonly length: string;
}

/** Serializes a value once, so an answer sent on many requests costs no JSON work. */
export function encodeJson(value: unknown): JsonBody {
  const bytes = Buffer.from(JSON.stringify(value));
  return { bytes, length: String(bytes.length) };
}

/** The `{message, statusCode}` body of every auth error answer. */
export function jsonBody(message: string, statusCode: number): JsonBody {
  return encodeJson({ message, statusCode });
}

export function sendJson(res: AuthResponse, status: number, body: JsonBody, headers: Record<string, string> = {}): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', body.length);
  // Tokens and login answers must not land in shared caches.
  res.setHeader('Cache-Control', 'no-store');
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.end(body.bytes);
}

/**
 * The username and password of an `Authorization: Basic <base64>` value
 * (RFC 7617), or undefined when the header is absent, uses another scheme
 * or does not decode to `user:password`.
 */
export function basicCredentials(header: string | undefined): { username: string; password: string } | undefined {
  if (header === undefined || header.length < 7 || header.slice(0, 6).toLowerCase() !== 'basic ') return undefined;
  const encoded = header.slice(6).trim();
  if (encoded === '' || !/^[A-Za-z0-9+/]+=*$/.test(encoded)) return undefined;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
