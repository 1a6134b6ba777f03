// What a request id may be, wherever one is read: from a client's
// X-Flint-Request-Id (the router), from a function's output (the function
// log), from a log filter (the controller, the CLI). Ids end up in headers,
// log files and terminals, so anything else (spaces, line breaks, escape
// sequences, unbounded lengths) is refused rather than cleaned.

/** 1-192 printable ASCII characters, no spaces (what Fission accepts too). */
export const REQUEST_ID_PATTERN = '^[\\x21-\\x7e]{1,192}$';
export const REQUEST_ID_MAX = 192;
const SANE_ID = new RegExp(REQUEST_ID_PATTERN);

export function isRequestId(id: unknown): id is string {
  return typeof id === 'string' && SANE_ID.test(id);
}
