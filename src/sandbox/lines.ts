// Splitting a worker's output into lines for the function log. A line longer
// than the cap is cut into pieces, so a function that prints without
// newlines cannot grow the executor's memory.
import { StringDecoder } from 'node:string_decoder';

export const MAX_LINE = 16 * 1024;

export class LineSplitter {
  readonly #decoder = new StringDecoder('utf8');
  readonly #onLine: (line: string) => void;
  #partial = '';

  constructor(onLine: (line: string) => void) {
    this.#onLine = onLine;
  }

  write(chunk: Buffer): void {
    let text = this.#partial + this.#decoder.write(chunk);
    let nl = text.indexOf('\n');
    while (nl !== -1) {
      this.#emit(text.slice(0, nl > 0 && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl));
      text = text.slice(nl + 1);
      nl = text.indexOf('\n');
    }
    while (text.length > MAX_LINE) {
      this.#emit(text.slice(0, MAX_LINE));
      text = text.slice(MAX_LINE);
    }
    this.#partial = text;
  }

  end(): void {
    const rest = this.#partial + this.#decoder.end();
    this.#partial = '';
    if (rest !== '') this.#emit(rest);
  }

  #emit(line: string): void {
    if (line.length <= MAX_LINE) this.#onLine(line);
    else for (let i = 0; i < line.length; i += MAX_LINE) this.#onLine(line.slice(i, i + MAX_LINE));
  }
}

/** The last few lines seen, for error messages about a worker that failed to start. */
export class Tail {
  readonly #lines: string[] = [];
  readonly #max: number;

  constructor(max = 20) {
    this.#max = max;
  }

  push(line: string): void {
    if (this.#lines.length === this.#max) this.#lines.shift();
    this.#lines.push(line.length > 500 ? `${line.slice(0, 500)}...` : line);
  }

  text(): string {
    return this.#lines.join('\n');
  }
}
