// Failures of the router's hop to a function instance. They never reach a
// user as such: the proxy maps them to the registry's FLINT_ERR_* codes
// (timeouts to 504, the rest to 502, a request that cannot be written to 400).

export type UpstreamErrorCode =
  /** No response head within the function's timeout. */
  | 'UPSTREAM_HEADERS_TIMEOUT'
  /** The response body went quiet for longer than the function's timeout. */
  | 'UPSTREAM_BODY_TIMEOUT'
  /** The instance closed the connection before the response was complete. */
  | 'UPSTREAM_CLOSED'
  /** The instance sent something that is not an HTTP/1.x response. */
  | 'UPSTREAM_BAD_RESPONSE'
  /** The pool was destroyed while the request was in flight. */
  | 'UPSTREAM_DESTROYED'
  /** The request itself cannot be sent (a header value with a line break). */
  | 'UPSTREAM_BAD_REQUEST'
  /** The caller ended a streamed response that reached its maximum duration. */
  | 'UPSTREAM_STREAM_LIMIT';

export class UpstreamError extends Error {
  readonly code: UpstreamErrorCode;

  constructor(code: UpstreamErrorCode, message: string) {
    super(message);
    this.name = 'UpstreamError';
    this.code = code;
  }
}

export function badResponse(what: string): UpstreamError {
  return new UpstreamError('UPSTREAM_BAD_RESPONSE', `the instance sent a malformed response: ${what}`);
}
