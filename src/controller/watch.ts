// `GET /v1/watch`: the store's watch as newline-delimited JSON, so a
// component in another process (kubernetes mode) or a script can follow
// changes and resume after a disconnect from the last resourceVersion seen.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { KindName } from '../api/kinds.ts';
import { WatchQuery } from '../api/params.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

const HEARTBEAT_MS = 15_000;

export function registerWatchRoutes(app: FastifyInstance, store: Store): void {
  app.get<{ Querystring: { kind?: KindName; namespace?: string; resourceVersion?: string } }>(
    '/v1/watch',
    {
      schema: {
        tags: ['watch'],
        summary: 'Follow changes as NDJSON lines {type, object}',
        description: 'type is ADDED, MODIFIED or DELETED. With resourceVersion, every change after it is replayed first (410 when it is too old).',
        querystring: WatchQuery,
        response: {
          200: {
            description: 'One JSON object per line, and an empty line as a heartbeat; the response lasts until the client leaves',
            content: { 'application/x-ndjson': { schema: Type.String() } },
          },
          ...errorResponses(410),
        },
      },
    },
    async (req, reply) => {
      const { kind, namespace, resourceVersion } = req.query;
      const watch = store.watch({ kind, namespace, sinceResourceVersion: resourceVersion }, (ev) => {
        reply.raw.write(`${JSON.stringify(ev)}\n`);
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
