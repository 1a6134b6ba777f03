// `GET /v1/namespaces/{ns}/functions/{name}/logs`: the function's log file,
// its last lines, and with follow=true everything appended after them. The
// file is read without following a link (src/fsafe): a link planted there
// is refused, not served. Lines may be picked by request or instance; the
// instance field is shown only as --detail's headers. The executor writes
// the file: where it runs apart (kubernetes mode, roles apart) the log is
// read from the executor leader's (FunctionLogSource), the same way.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { formatLogLine, matchesLogFilter, parseLogLine } from '../api/function-log-line.ts';
import { LogQuery, NameParams } from '../api/params.ts';
import { type DataLayout, functionLogFile } from '../config/layout.ts';
import { type FileRange, readRangeNoFollow } from '../fsafe/open.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

const FOLLOW_POLL_MS = 250;
/** The most of a log read at once: the tail a request starts from, and each read of a follow. */
export const LOG_READ_LIMIT = 4 * 1024 * 1024;

/** Reads a function's log from byte `from` (its last LOG_READ_LIMIT bytes without it), at most LOG_READ_LIMIT bytes. */
export type FunctionLogSource = (namespace: string, name: string, from: number | undefined) => Promise<FileRange>;

/** The log files in this process's data directory. */
export function localLogSource(layout: DataLayout): FunctionLogSource {
  return async (namespace, name, from) => readRangeNoFollow(functionLogFile(layout, namespace, name), from, LOG_READ_LIMIT);
}

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

/** Each whole line of a read; a line cut at the read's cap counts as one. */
function linesOf(text: string): string[] {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

async function lastLines(source: FunctionLogSource, namespace: string, name: string, count: number, view: LogView): Promise<{ text: string; next: number; file: string }> {
  const { text, start, next, file } = await source(namespace, name, undefined);
  const lines = linesOf(text);
  // A read that starts inside the file starts inside a line.
  if (start > 0) lines.shift();
  const kept = count === 0 ? [] : lines.filter((l) => view.keeps(l)).slice(-count);
  return { text: view.render(kept), next, file };
}

export function registerLogRoutes(app: FastifyInstance, store: Store, source: FunctionLogSource): void {
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
      const last = await lastLines(source, namespace, name, count, view);
      if (follow !== 'true') {
        reply.type('text/plain; charset=utf-8');
        return last.text;
      }
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-cache' });
      reply.raw.write(last.text);
      // Polling keeps this simple and works for files that appear later or
      // are replaced, here or at the executor; a follower is an interactive
      // user, not a hot path. Reads end on whole lines (readRangeNoFollow),
      // so a line is filtered and shown once its end is written.
      let offset = last.next;
      let file = last.file;
      let reading = false;
      const timer = setInterval(() => {
        if (reading) return;
        reading = true;
        source(namespace, name, offset)
          .then((r) => {
            // Another file (it appeared, was replaced, or a new executor leader started its own): from its start.
            if (r.file !== file) {
              file = r.file;
              offset = 0;
              return;
            }
            offset = r.next;
            const shown = view.render(linesOf(r.text).filter((l) => view.keeps(l)));
            if (shown !== '') reply.raw.write(shown);
          })
          // The next poll tries again (an executor leader moving, a file replaced under the read).
          .catch(() => {})
          .finally(() => {
            reading = false;
          });
      }, FOLLOW_POLL_MS);
      const stop = () => clearInterval(timer);
      req.raw.on('close', stop);
      reply.raw.on('close', stop);
    },
  );
}
