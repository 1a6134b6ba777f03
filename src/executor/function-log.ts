// Appends worker output and lifecycle events to each function's log file,
// which the controller serves (`flint fn log`).
import fs from 'node:fs';
import path from 'node:path';
import { type DataLayout, functionLogFile } from '../config/layout.ts';

export class FunctionLogs {
  readonly #layout: DataLayout;
  readonly #streams = new Map<string, fs.WriteStream>();

  constructor(layout: DataLayout) {
    this.#layout = layout;
  }

  #stream(namespace: string, name: string): fs.WriteStream {
    const key = `${namespace}/${name}`;
    let s = this.#streams.get(key);
    if (!s) {
      const file = functionLogFile(this.#layout, namespace, name);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      s = fs.createWriteStream(file, { flags: 'a' });
      s.on('error', () => this.#streams.delete(key));
      this.#streams.set(key, s);
    }
    return s;
  }

  write(namespace: string, name: string, stream: 'stdout' | 'stderr' | 'flint', line: string): void {
    this.#stream(namespace, name).write(`${new Date().toISOString()} [${stream}] ${line}\n`);
  }

  /** Closes a function's file (deleted functions); it reopens on the next write. */
  close(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    this.#streams.get(key)?.end();
    this.#streams.delete(key);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#streams.values()].map((s) => new Promise((r) => s.end(r))));
    this.#streams.clear();
  }
}
