// One line of a function's log, as the executor writes it and the controller
// reads it back (`flint fn log`):
//
//   <ISO time> [instance=<id>] [request=<id>] [<stream>] <text>
//
// The fields before the bracketed stream are the server's, so a function's
// text can never pass for them; the stream comes right before the text, as
// it always has (`[stdout] hello`).
//
// A runtime says which request a line belongs to by starting it with
// REQUEST_MARK, the request id and REQUEST_MARK again. The mark comes from
// the function's own output, so the id in it is checked like any untrusted
// one: a line whose mark holds no valid id is kept whole and untagged.
import { isRequestId, REQUEST_ID_MAX } from './request-id.ts';

/** ASCII record separator: never in a request id, and not something a program prints by accident. */
export const REQUEST_MARK = '\x1e';

export type LogStream = 'stdout' | 'stderr' | 'flint';

export interface LogLine {
  time: string;
  instance?: string;
  requestId?: string;
  stream: string;
  text: string;
}

/** Instance ids as the executors name them: workers (`[a-z0-9-]`) and pods (DNS subdomains). */
export const INSTANCE_PATTERN = '^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$';
const INSTANCE = new RegExp(INSTANCE_PATTERN);

/** Splits a runtime's request mark off a line: the id it names (when valid) and the text after it. */
export function takeRequestMark(line: string): { requestId?: string; text: string } {
  if (line.charCodeAt(0) !== 0x1e) return { text: line };
  const end = line.indexOf(REQUEST_MARK, 1);
  if (end < 0 || end > REQUEST_ID_MAX + 1) return { text: line };
  const id = line.slice(1, end);
  return isRequestId(id) ? { requestId: id, text: line.slice(end + 1) } : { text: line };
}

export function formatLogLine(l: LogLine): string {
  let head = l.time;
  if (l.instance !== undefined && INSTANCE.test(l.instance)) head += ` instance=${l.instance}`;
  if (l.requestId !== undefined && isRequestId(l.requestId)) head += ` request=${l.requestId}`;
  return `${head} [${l.stream}] ${l.text}`;
}

/** A line of the file back into its fields; undefined for one in no known form (kept as it is by readers). */
export function parseLogLine(line: string): LogLine | undefined {
  let at = line.indexOf(' ');
  if (at <= 0) return undefined;
  const out: LogLine = { time: line.slice(0, at), stream: '', text: '' };
  for (;;) {
    const next = line.indexOf(' ', at + 1);
    const token = next < 0 ? line.slice(at + 1) : line.slice(at + 1, next);
    if (token.startsWith('instance=') && out.instance === undefined && out.requestId === undefined) out.instance = token.slice(9);
    else if (token.startsWith('request=') && out.requestId === undefined) out.requestId = token.slice(8);
    else if (token.length > 2 && token.startsWith('[') && token.endsWith(']')) {
      out.stream = token.slice(1, -1);
      out.text = next < 0 ? '' : line.slice(next + 1);
      return out;
    } else return undefined;
    if (next < 0) return undefined;
    at = next;
  }
}

/** `fn log` filters: a line without the field asked for does not match. */
export function matchesLogFilter(l: LogLine | undefined, f: { requestId?: string; instance?: string }): boolean {
  if (f.requestId !== undefined && l?.requestId !== f.requestId) return false;
  if (f.instance !== undefined && l?.instance !== f.instance) return false;
  return true;
}
