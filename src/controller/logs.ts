// `GET /v1/namespaces/{ns}/functions/{name}/logs`: the function's log file,
// its last lines, and with follow=true everything appended after them. The
// file is read without following a link (src/fsafe): a link planted there
// is refused, not served.
import fs from 'node:fs';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { LogQuery, NameParams } from '../api/params.ts';
import { type DataLayout, functionLogFile } from '../config/layout.ts';
import { openNoFollow, readStreamNoFollow } from '../fsafe/open.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

const FOLLOW_POLL_MS = 250;
const TAIL_READ_LIMIT = 4 * 1024 * 1024;

function lastLines(file: string, count: number): { text: string; size: number } {
  let fd: number;
  try {
    fd = openNoFollow(file, 'read');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { text: '', size: 0 };
    throw err;
  }
  try {
    const { size } = fs.fstatSync(fd);
    const len = Math.min(size, TAIL_READ_LIMIT);
    const buf = Buffer.alloc(len);
    fs.readSync(fd, buf, 0, len, size - len);
    const lines = buf.toString('utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    const kept = lines.slice(-count);
    return { text: kept.length ? `${kept.join('\n')}\n` : '', size };
  } finally {
    fs.closeSync(fd);
  }
}

export function registerLogRoutes(app: FastifyInstance, store: Store, layout: DataLayout): void {
  app.get<{ Params: { namespace: string; name: string }; Querystring: { follow?: 'true' | 'false'; tail?: string } }>(
    '/v1/namespaces/:namespace/functions/:name/logs',
    {
      schema: {
        tags: ['functions'],
        summary: "A function's log",
        params: NameParams,
        querystring: LogQuery,
        response: {
          200: { description: 'The log lines', content: { 'text/plain; charset=utf-8': { schema: Type.String() } } },
          ...errorResponses(404),
        },
      },
    },
    async (req, reply) => {
      const { namespace, name } = req.params;
      const { follow, tail } = req.query;
      const count = tail === undefined ? 1000 : Number(tail);
      if (!(await store.get('Function', namespace, name))) {
        throw new FlintError('FLINT_ERR_NOT_FOUND', `function '${name}' not found in namespace '${namespace}'`);
      }
      const file = functionLogFile(layout, namespace, name);
      const { text, size } = lastLines(file, count);
      if (follow !== 'true') {
        reply.type('text/plain; charset=utf-8');
        return text;
      }
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-cache' });
      reply.raw.write(text);
      // Polling keeps this simple and works for files that appear later or
      // are rotated; a follower is an interactive user, not a hot path.
      let offset = size;
      const timer = setInterval(() => {
        let st: fs.Stats;
        try {
          st = fs.lstatSync(file);
        } catch {
          return;
        }
        if (st.size < offset) offset = 0;
        if (st.size === offset) return;
        let stream: fs.ReadStream;
        try {
          stream = readStreamNoFollow(file, { start: offset, end: st.size - 1 });
        } catch {
          return;
        }
        offset = st.size;
        stream.on('data', (chunk) => reply.raw.write(chunk));
      }, FOLLOW_POLL_MS);
      const stop = () => clearInterval(timer);
      req.raw.on('close', stop);
      reply.raw.on('close', stop);
    },
  );
}
