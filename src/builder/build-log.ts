// A package's build log, kept within a size the store can hold: the start of
// the output (what the build set out to do) and its end (why it failed), with
// a line saying how much of the middle was left out.
const HEAD_BYTES = 64 * 1024;
const TAIL_BYTES = 192 * 1024;

export class BuildLog {
  readonly #head: string[] = [];
  #headBytes = 0;
  readonly #tail: string[] = [];
  #tailBytes = 0;
  #dropped = 0;

  line(text: string): void {
    const size = Buffer.byteLength(text) + 1;
    if (this.#tail.length === 0 && this.#headBytes + size <= HEAD_BYTES) {
      this.#head.push(text);
      this.#headBytes += size;
      return;
    }
    this.#tail.push(text);
    this.#tailBytes += size;
    while (this.#tailBytes > TAIL_BYTES && this.#tail.length > 1) {
      const gone = this.#tail.shift() as string;
      this.#tailBytes -= Buffer.byteLength(gone) + 1;
      this.#dropped++;
    }
  }

  text(): string {
    const middle = this.#dropped > 0 ? [`[... ${this.#dropped} lines of build output left out ...]`] : [];
    const lines = [...this.#head, ...middle, ...this.#tail];
    return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
  }
}
