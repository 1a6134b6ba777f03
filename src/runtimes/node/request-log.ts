// Tags what a function prints while it serves a request with that request's
// id, so `flint fn log --request-id` finds it. Each request runs in an async
// scope holding its id (the router's X-Flint-Request-Id); stdout and stderr
// start every line written inside one with the mark the executor reads
// (src/api/function-log-line.ts). Concurrent requests on one worker keep
// their own ids, since the scope follows the request's callbacks and promises.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingMessage } from 'node:http';

const MARK = '\x1e';
// The router sends only such ids; anyone else reaching the worker gets no tag rather than one it wrote.
const SANE_ID = /^[\x21-\x7e]{1,192}$/;

const scope = new AsyncLocalStorage<string>();

/** The request's id as the router sent it, when it is one. */
export function requestIdOf(req: IncomingMessage): string | undefined {
  const id = req.headers['x-flint-request-id'];
  return typeof id === 'string' && SANE_ID.test(id) ? id : undefined;
}

/** Runs `fn` as part of the request (its output tagged with the request's id). */
export function inRequest<T>(req: IncomingMessage, fn: () => T): T {
  const id = requestIdOf(req);
  return id === undefined ? fn() : scope.run(id, fn);
}

export function currentRequestId(): string | undefined {
  return scope.getStore();
}

type Write = (chunk: unknown, encoding?: unknown, cb?: unknown) => boolean;

/** Marks the start of each line of `text`; `atStart` says whether the stream is at a line start. */
export function markLines(text: string, id: string, atStart: boolean): string {
  const mark = MARK + id + MARK;
  const parts = text.split('\n');
  for (let i = 0; i < parts.length; i++) {
    if (i === parts.length - 1 && parts[i] === '') break;
    if (i > 0 || atStart) parts[i] = mark + parts[i];
  }
  return parts.join('\n');
}

function endsLine(chunk: unknown): boolean {
  if (typeof chunk === 'string') return chunk.endsWith('\n');
  if (chunk instanceof Uint8Array) return chunk.length > 0 && chunk[chunk.length - 1] === 10;
  return false;
}

/** Makes `stream` tag what is written to it inside a request. */
export function tagRequestOutput(stream: NodeJS.WritableStream): void {
  const write = stream.write.bind(stream) as Write;
  let atStart = true;
  (stream as { write: Write }).write = (chunk, encoding, cb) => {
    const id = scope.getStore();
    if (id === undefined || (typeof chunk !== 'string' && !(chunk instanceof Uint8Array))) {
      if (typeof chunk === 'string' ? chunk.length > 0 : chunk instanceof Uint8Array && chunk.length > 0) atStart = endsLine(chunk);
      return write(chunk, encoding, cb);
    }
    const text =
      typeof chunk === 'string'
        ? typeof encoding === 'string' && !/^utf-?8$/i.test(encoding)
          ? Buffer.from(chunk, encoding as BufferEncoding).toString('utf8')
          : chunk
        : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
    if (text.length === 0) return write(chunk, encoding, cb);
    const marked = markLines(text, id, atStart);
    atStart = text.endsWith('\n');
    return typeof encoding === 'function' ? write(marked, encoding) : write(marked, 'utf8', cb);
  };
}
