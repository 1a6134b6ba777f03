// `GET /v1/namespaces/{ns}/functions/{name}/logs`: the function's log file,
// its last lines, and with follow=true everything appended after them. The
// file is read without following a link (src/fsafe): a link planted there
// is refused, not served. Lines may be picked by request or instance; the
// instance field is shown only as --detail's headers.
import fs from 'node:fs';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { formatLogLine, matchesLogFilter, parseLogLine } from '../api/function-log-line.ts';
import { LogQuery, NameParams } from '../api/params.ts';
import { type DataLayout, functionLogFile } from '../config/layout.ts';
import { openNoFollow, readStreamNoFollow } from '../fsafe/open.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

const FOLLOW_POLL_MS = 250;
const TAIL_READ_LIMIT = 4 * 1024 * 1024;

interface LogFilter {
  requestId?: string;
  instance?: string;
}

/**
 * Turns stored lines into what `fn log` shows: the lines the filter keeps,
 * without their instance field; with `detail`, a header wherever the
 * instance changes (kept across the chunks of a follow).
 */
class LogView {
  readonly #filter: LogFilter;
  readonly #header: ((instance: string) => string) | undefined;
  #instance: string | undefined = undefined;

  constructor(filter: LogFilter, header: ((instance: string) => string) | undefined) {
    this.#filter = filter;
    this.#header = header;
  }

  /** Whether a stored line is shown at all. */
  keeps(line: string): boolean {
    return this.#filter.requestId === undefined && this.#filter.instance === undefined ? true : matchesLogFilter(parseLogLine(line), this.#filter);
  }

  render(lines: string[]): string {
    let out = '';
    for (const line of lines) {
      const parsed = parseLogLine(line);
      if (this.#header !== undefined) {
        const instance = parsed?.instance ?? '-';
        if (instance !== this.#instance) {
          this.#instance = instance;
          out += this.#header(instance);
        }
      }
      out += `${parsed === undefined ? line : formatLogLine({ ...parsed, instance: undefined })}\n`;
    }
    return out;
  }
}

function lastLines(file: string, count: number, view: LogView): { text: string; size: number } {
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
    // A read that starts inside the file starts inside a line.
    if (len < size) lines.shift();
    const kept = count === 0 ? [] : lines.filter((l) => view.keeps(l)).slice(-count);
    return { text: view.render(kept), size };
  } finally {
    fs.closeSync(fd);
  }
}

export function registerLogRoutes(app: FastifyInstance, store: Store, layout: DataLayout): void {
  app.get<{ Params: { namespace: string; name: string }; Querystring: { follow?: 'true' | 'false'; tail?: string; requestId?: string; instance?: string; detail?: 'true' | 'false' } }>(
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
      const { follow, tail, requestId, instance, detail } = req.query;
      const count = tail === undefined ? 1000 : Number(tail);
      const fn = await store.get('Function', namespace, name);
      if (!fn) {
        throw new FlintError('FLINT_ERR_NOT_FOUND', `function '${name}' not found in namespace '${namespace}'`);
      }
      // Fission's --detail header, with the instance where Fission names the pod, container and node.
      const header = detail === 'true' ? (i: string) => `\n=== Function=${name} Environment=${fn.spec.environment.name} Namespace=${namespace} Instance=${i}\n` : undefined;
      const view = new LogView({ requestId, instance }, header);
      const file = functionLogFile(layout, namespace, name);
      const { text, size } = lastLines(file, count, view);
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
      let partial = '';
      const timer = setInterval(() => {
        let st: fs.Stats;
        try {
          st = fs.lstatSync(file);
        } catch {
          return;
        }
        if (st.size < offset) {
          offset = 0;
          partial = '';
        }
        if (st.size === offset) return;
        let stream: fs.ReadStream;
        try {
          stream = readStreamNoFollow(file, { start: offset, end: st.size - 1 });
        } catch {
          return;
        }
        offset = st.size;
        // Whole lines only: a line is filtered and shown once its end is written.
        stream.setEncoding('utf8');
        stream.on('data', (chunk) => {
          const lines = (partial + String(chunk)).split('\n');
          partial = lines.pop() ?? '';
          const shown = view.render(lines.filter((l) => view.keeps(l)));
          if (shown !== '') reply.raw.write(shown);
        });
      }, FOLLOW_POLL_MS);
      const stop = () => clearInterval(timer);
      req.raw.on('close', stop);
      reply.raw.on('close', stop);
    },
  );
}
