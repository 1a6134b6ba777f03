// Appends worker output and lifecycle events to each function's log file,
// which the controller serves (`flint fn log`). The server may run as root
// and the lines are the function's own: the file is opened without following
// a link and its directory made without following one (src/fsafe), so a link
// planted at `logs/<ns>/<fn>.log` can never turn a function's stdout into a
// write to another file. Such a log is refused, said once, and its lines
// dropped until the function's log is closed.
//
// Each line says which instance wrote it and, when its runtime marked it,
// which request it was written for (src/api/function-log-line.ts), so
// `flint fn log --request-id` and `--instance` can pick lines out.
import type fs from 'node:fs';
import path from 'node:path';
import { formatLogLine, type LogStream, takeRequestMark } from '../api/function-log-line.ts';
import { type DataLayout, functionLogFile } from '../config/layout.ts';
import { mkdirUnder } from '../fsafe/mkdir.ts';
import { appendStreamNoFollow } from '../fsafe/open.ts';

export type LogRefused = (namespace: string, name: string, err: Error) => void;

export class FunctionLogs {
  readonly #layout: DataLayout;
  readonly #onRefused: LogRefused;
  readonly #streams = new Map<string, fs.WriteStream>();
  /** Functions whose log file was refused: their lines go nowhere until close(). */
  readonly #refused = new Set<string>();

  constructor(layout: DataLayout, onRefused: LogRefused = () => {}) {
    this.#layout = layout;
    this.#onRefused = onRefused;
  }

  #stream(namespace: string, name: string): fs.WriteStream | undefined {
    const key = `${namespace}/${name}`;
    let s = this.#streams.get(key);
    if (s || this.#refused.has(key)) return s;
    const file = functionLogFile(this.#layout, namespace, name);
    try {
      mkdirUnder(this.#layout.logs, path.relative(this.#layout.logs, path.dirname(file)));
      s = appendStreamNoFollow(file);
    } catch (err) {
      this.#refused.add(key);
      this.#onRefused(namespace, name, err as Error);
      return undefined;
    }
    s.on('error', () => this.#streams.delete(key));
    this.#streams.set(key, s);
    return s;
  }

  /** `instance`: the worker or pod that wrote the line, when one did. False when the function's log is refused. */
  write(namespace: string, name: string, stream: LogStream, line: string, instance?: string): boolean {
    const out = this.#stream(namespace, name);
    if (out === undefined) return false;
    // Only what runtimes write carries a request mark; the server's own lines are taken as they are.
    const { requestId, text } = stream === 'flint' ? { requestId: undefined, text: line } : takeRequestMark(line);
    out.write(`${formatLogLine({ time: new Date().toISOString(), instance, requestId, stream, text })}\n`);
    return true;
  }

  /** Closes a function's file (deleted functions); it reopens on the next write. */
  close(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    this.#streams.get(key)?.end();
    this.#streams.delete(key);
    this.#refused.delete(key);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#streams.values()].map((s) => new Promise((r) => s.end(r))));
    this.#streams.clear();
    this.#refused.clear();
  }
}
