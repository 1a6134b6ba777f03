// The last head a connection parsed, kept so that the same bytes are not
// parsed again. A client on a kept-alive connection often repeats its request
// head, and an instance its response head (only Date changes, once a second),
// so comparing bytes is most often all a head costs. Parsing is a function of
// the bytes alone, so equal bytes may share one (frozen) meaning.

/** By default, longer heads are parsed every time rather than kept per connection. */
export const MAX_REMEMBERED_HEAD = 2048;

/**
 * After this many heads in a row that differ from the one before, a
 * connection keeps only one head in SAMPLE_EVERY: one whose heads always
 * change (a counter in its path) pays little for the copies.
 */
const MISSES_BEFORE_SAMPLING = 4;
const SAMPLE_EVERY = 16;

export class RememberedHead<T> {
  /** A buffer of the connection's own, not a view of a socket's: those are reused. */
  #bytes: Buffer | undefined = undefined;
  #length = 0;
  #value: T | undefined = undefined;
  #misses = 0;
  readonly #maxBytes: number;

  /** `maxBytes`: the longest head kept; what a connection holds while it is idle. */
  constructor(maxBytes = MAX_REMEMBERED_HEAD) {
    this.#maxBytes = maxBytes;
  }

  /** What buf[pos, end) mean, when they are the bytes remembered. */
  get(buf: Buffer, pos: number, end: number): T | undefined {
    const bytes = this.#bytes;
    const length = end - pos;
    if (bytes !== undefined && length === this.#length && buf.compare(bytes, 0, length, pos, end) === 0) {
      this.#misses = 0;
      return this.#value;
    }
    this.#misses++;
    return undefined;
  }

  /** Whether to remember the head just parsed (set() it, frozen): false for a long one, or while heads keep changing. */
  get wanted(): boolean {
    return this.#misses <= MISSES_BEFORE_SAMPLING || this.#misses % SAMPLE_EVERY === 0;
  }

  /**
   * What buf[pos, end) mean: the remembered value when they are the bytes
   * remembered, else `parse` of them as latin1, remembered (after `freeze`,
   * as every repeat shares it) when wanted. Both are plain functions, not
   * closures, so a request makes none.
   */
  parse(buf: Buffer, pos: number, end: number, parse: (head: string) => T, freeze: (value: T) => T): T {
    const known = this.get(buf, pos, end);
    if (known !== undefined) return known;
    const value = parse(buf.toString('latin1', pos, end));
    if (this.wanted && end - pos <= this.#maxBytes) this.set(buf, pos, end, freeze(value));
    return value;
  }

  /** Remembers `value` as the meaning of buf[pos, end) (false for a head too long); it must be frozen, as every repeat of the head shares it. */
  set(buf: Buffer, pos: number, end: number, value: T): boolean {
    const length = end - pos;
    if (length > this.#maxBytes) return false;
    if (this.#bytes === undefined || this.#bytes.length < length) this.#bytes = Buffer.allocUnsafeSlow(Math.max(length, 256));
    buf.copy(this.#bytes, 0, pos, end);
    this.#length = length;
    this.#value = value;
    return true;
  }
}
