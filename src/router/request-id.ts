// Request ids: a client's own id is kept so a caller can correlate its logs
// with ours; otherwise a process-unique one is minted. A random per-process
// prefix plus a counter is unique enough across restarts and costs far less
// than a UUID per request.
import { randomBytes } from 'node:crypto';
import { isRequestId } from '../api/request-id.ts';

const PREFIX = `${randomBytes(6).toString('base64url')}-`;
let counter = 0;

export function newRequestId(): string {
  counter = counter === Number.MAX_SAFE_INTEGER ? 1 : counter + 1;
  return PREFIX + counter.toString(36);
}

/** The client's id when it is sane, else a new one. */
export function requestIdFrom(given: string | undefined): string {
  return isRequestId(given) ? given : newRequestId();
}
