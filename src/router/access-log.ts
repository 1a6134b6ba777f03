// The router's access log (install value router.accessLog): one JSON line
// per request for a function, or for a path no route claims. Every field a
// client chose (method, path) goes through JSON.stringify, which escapes
// line breaks and control characters, so a request can never start a line
// of its own; the request id is the router's, or a client's that passed
// its check (request-id.ts).
import type { Http1Request } from './http1/request.ts';

export interface AccessEntry {
  time: string;
  method: string;
  /** The path as requested, without the query (which may carry secrets). */
  path: string;
  /** `<namespace>/<name>`, or null when no function was picked. */
  function: string | null;
  status: number;
  durationMs: number;
  requestId: string;
  /** The instance that served the request, or null when none did. */
  instance: string | null;
}

export type AccessLog = (entry: AccessEntry) => void;

/** Long enough for any real path; the head size limit bounds it anyway. */
const MAX_PATH = 2048;

export function accessEntry(req: Http1Request, status: number, requestId: string, startedMs: number, fn: string | null, instance: string | null): AccessEntry {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return {
    time: new Date().toISOString(),
    method: req.method ?? '',
    path: (q < 0 ? url : url.slice(0, q)).slice(0, MAX_PATH),
    function: fn,
    status,
    durationMs: Math.round((performance.now() - startedMs) * 1000) / 1000,
    requestId,
    instance,
  };
}

/** Writes entries as JSON lines to `out`. */
export function jsonLines(out: { write(line: string): unknown }): AccessLog {
  return (entry) => out.write(`${JSON.stringify(entry)}\n`);
}
