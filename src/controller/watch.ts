// `GET /v1/watch`: the store's watch as newline-delimited JSON, so a
// component in another process (kubernetes mode) or a script can follow
// changes and resume after a disconnect from the last resourceVersion seen.
// Asked with `Accept: text/event-stream` (the dashboard), the same changes
// come as server-sent events: `event: ADDED|MODIFIED|DELETED`, `id:` the
// object's resourceVersion, `data:` the change.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { KindName } from '../api/kinds.ts';
import { WatchQuery } from '../api/params.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';
import { EventSchema, openEventStream, wantsEventStream } from './sse.ts';

const HEARTBEAT_MS = 15_000;

export function registerWatchRoutes(app: FastifyInstance, store: Store): void {
  app.get<{ Querystring: { kind?: KindName; kinds?: string; namespace?: string; resourceVersion?: string } }>(
    '/v1/watch',
    {
      schema: {
        tags: ['watch'],
        summary: 'Follow changes as NDJSON lines {type, object}, or as server-sent events',
        description:
          'type is ADDED, MODIFIED or DELETED. With resourceVersion, every change after it is replayed first (410 when it is too old). ' +
          'With Accept: text/event-stream, each change is an event named by its type, with the object\'s resourceVersion as its id and {type, object} as its data.',
        querystring: WatchQuery,
        response: {
          200: {
            description: 'One JSON object per line, and an empty line as a heartbeat; the response lasts until the client leaves',
            content: { 'application/x-ndjson': { schema: Type.String() }, 'text/event-stream': { schema: EventSchema } },
          },
          ...errorResponses(410),
        },
      },
    },
    async (req, reply) => {
      const { kind, namespace, resourceVersion } = req.query;
      const only = req.query.kinds === undefined ? undefined : new Set(req.query.kinds.split(','));
      const wanted = (ev: { object: { kind: string } }) => only === undefined || only.has(ev.object.kind);
      if (wantsEventStream(req.headers.accept)) {
        const events: Array<{ type: string; object: { metadata: { resourceVersion?: string } } }> = [];
        let stream: ReturnType<typeof openEventStream> | undefined;
        // Replayed changes arrive before the stream is open: they wait for it.
        const watch = store.watch({ kind, namespace, sinceResourceVersion: resourceVersion }, (ev) => {
          if (!wanted(ev)) return;
          if (stream) stream.send(ev.type, ev, ev.object.metadata.resourceVersion);
          else events.push(ev);
        });
        reply.hijack();
        stream = openEventStream(req.raw, reply.raw);
        for (const ev of events.splice(0)) stream.send(ev.type, ev, ev.object.metadata.resourceVersion);
        stream.onClose(() => watch.close());
        return;
      }
      const watch = store.watch({ kind, namespace, sinceResourceVersion: resourceVersion }, (ev) => {
        if (wanted(ev)) reply.raw.write(`${JSON.stringify(ev)}\n`);
      });
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-cache' });
      const beat = setInterval(() => reply.raw.write('\n'), HEARTBEAT_MS);
      const stop = () => {
        clearInterval(beat);
        watch.close();
      };
      req.raw.on('close', stop);
      reply.raw.on('close', stop);
    },
  );
}
