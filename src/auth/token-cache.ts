// A bounded LRU of tokens that already passed full verification, so the
// router's hot path pays a map lookup instead of an HMAC and two base64 and
// JSON decodes. Only successes are stored: a flood of bad tokens cannot push
// good ones out, and an entry never outlives its token's `exp`.

export interface CacheEntry<V> {
  value: V;
  /** Epoch ms from which the entry must no longer be served. */
  validUntil: number;
}

export class VerifiedTokenCache<V> {
  readonly #max: number;
  // A Map iterates in insertion order; re-inserting on a hit moves the key to
  // the back, so the first key is always the least recently used one.
  readonly #entries = new Map<string, CacheEntry<V>>();
  hits = 0;
  misses = 0;

  constructor(maxEntries: number) {
    if (!Number.isInteger(maxEntries) || maxEntries < 0) throw new RangeError('maxEntries must be a non-negative integer');
    this.#max = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(token: string, now: number): V | undefined {
    const entry = this.#entries.get(token);
    if (entry === undefined) {
      this.misses++;
      return undefined;
    }
    this.#entries.delete(token);
    if (now >= entry.validUntil) {
      this.misses++;
      return undefined;
    }
    this.#entries.set(token, entry);
    this.hits++;
    return entry.value;
  }

  set(token: string, value: V, validUntil: number): void {
    if (this.#max === 0) return;
    this.#entries.delete(token);
    this.#entries.set(token, { value, validUntil });
    if (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
  }

  clear(): void {
    this.#entries.clear();
  }
}
