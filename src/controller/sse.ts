// Server-sent events for the control plane's streams (the watch, a
// function's metrics). A browser reads them with fetch and a stream reader,
// not EventSource, so every request carries its Authorization header and no
// token ever sits in a URL that a proxy or an access log keeps.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Type } from '@sinclair/typebox';

const HEARTBEAT_MS = 15_000;

/** One event as the OpenAPI document describes a `text/event-stream` response (what clients such as schemathesis check). */
export const EventSchema = Type.Object({
  event: Type.Optional(Type.String()),
  id: Type.Optional(Type.String()),
  data: Type.String({ description: 'JSON' }),
});

/** True when the client asked for `text/event-stream` (Accept), the dashboard's way of asking for SSE. */
export function wantsEventStream(accept: string | undefined): boolean {
  return accept !== undefined && /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept);
}

export interface EventStream {
  /** One event; `data` is JSON-encoded, so it is one line whatever it holds. */
  send(event: string, data: unknown, id?: string): void;
  /** Runs when the client leaves (or the server closes the response). */
  onClose(fn: () => void): void;
}

/** Takes over a hijacked response: writes the head, a heartbeat comment now and then, and the events. */
export function openEventStream(req: IncomingMessage, res: ServerResponse): EventStream {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-store',
    // A reverse proxy (nginx) would otherwise hold the events back in its buffer.
    'x-accel-buffering': 'no',
  });
  // The first bytes go out at once, so the client knows the stream is open.
  res.write(': open\n\n');
  const beat = setInterval(() => res.write(': heartbeat\n\n'), HEARTBEAT_MS);
  const closers: Array<() => void> = [() => clearInterval(beat)];
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    for (const fn of closers) fn();
  };
  req.on('close', close);
  res.on('close', close);
  return {
    send(event, data, id) {
      if (closed) return;
      // Event names and ids are ours (kinds, change types, versions), never a client's: no line breaks to escape.
      res.write(`event: ${event}\n${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`);
    },
    onClose(fn) {
      if (closed) fn();
      else closers.push(fn);
    },
  };
}
