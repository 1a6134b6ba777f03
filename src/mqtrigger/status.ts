// A trigger's status: what the trigger manager knows of its consumer
// (consuming, waiting for a broker or a secret, failed by its broker),
// published as the trigger's `status` so every reader of the store sees the
// same. Written only when it changes: a broker that keeps refusing with the
// same error, or a restart that finds everything as it was, writes nothing.
import { isFlintError } from '../api/errors.ts';
import type { MessageQueueTrigger, MessageQueueTriggerState, MessageQueueTriggerStatus } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';

export interface TriggerState {
  state: MessageQueueTriggerState;
  /** waiting: what for; error: the error. */
  message?: string;
}

/** The schema's limit; a broker's error can be long. */
const MAX_MESSAGE = 4096;

function clip(text: string): string {
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 3)}...`;
}

/**
 * The status once the trigger's consumer (for its spec's `generation`) is
 * in state `s` at `now`, or undefined when `cur` says that already. The
 * transition time moves only when the state does; the last error and its
 * time stay after the trigger recovers, and move only with a new error.
 */
export function nextStatus(cur: MessageQueueTriggerStatus | undefined, s: TriggerState, generation: number, now: string): MessageQueueTriggerStatus | undefined {
  const message = s.message === undefined || s.message === '' ? undefined : clip(s.message);
  if (cur?.state === s.state && cur.message === message && cur.observedGeneration === generation) return undefined;
  const next: MessageQueueTriggerStatus = { state: s.state };
  if (message !== undefined) next.message = message;
  next.lastTransitionTime = cur?.state === s.state && cur.lastTransitionTime !== undefined ? cur.lastTransitionTime : now;
  if (s.state === 'error' && !(cur?.state === 'error' && cur.lastError === message)) {
    next.lastError = message ?? 'unknown error';
    next.lastErrorTime = now;
  } else if (cur?.lastError !== undefined) {
    next.lastError = cur.lastError;
    if (cur.lastErrorTime !== undefined) next.lastErrorTime = cur.lastErrorTime;
  }
  next.observedGeneration = generation;
  return next;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}

const same = (a: TriggerState, b: TriggerState) => a.state === b.state && (a.message ?? '') === (b.message ?? '');

interface Pending {
  generation: number;
  state: TriggerState;
}

interface Entry {
  /** The state to publish next, if any. */
  pending?: Pending;
  /** What was last published (or found published), to skip a read when nothing changed. */
  published?: Pending;
  writing: boolean;
  forgotten: boolean;
}

export interface StatusWriterOptions {
  store: Store;
  /** Told when a write fails for another reason than a change in between. */
  onError?: (key: string, err: unknown) => void;
  /** Wait before trying a failed write again (default 1 s). */
  retryMs?: number;
  now?: () => Date;
}

/**
 * Publishes each trigger's state, one write at a time per trigger and only
 * the latest state: reports that come while a write is under way are folded
 * into the next one. Each write reads the trigger first and writes only when
 * its stored status differs, over the version it read (another writer in
 * between makes it read again).
 */
export class TriggerStatusWriter {
  readonly #o: StatusWriterOptions;
  readonly #entries = new Map<string, Entry>();
  #stopped = false;
  /** Ends the waits between failed writes at once: the writer is stopping. */
  readonly #stopping = new AbortController();
  /** Writes under way (tests, stop). */
  readonly #inflight = new Set<Promise<void>>();

  constructor(opts: StatusWriterOptions) {
    this.#o = opts;
  }

  /** The trigger `namespace/name`, at spec `generation`, is now in `state`. */
  report(namespace: string, name: string, generation: number, state: TriggerState): void {
    if (this.#stopped) return;
    const key = `${namespace}/${name}`;
    let e = this.#entries.get(key);
    if (e === undefined) {
      e = { writing: false, forgotten: false };
      this.#entries.set(key, e);
    }
    const want = { generation, state };
    if (!e.writing && e.published !== undefined && e.published.generation === generation && same(e.published.state, state)) return;
    e.pending = want;
    if (!e.writing) this.#start(namespace, name, e);
  }

  /** The trigger is gone: nothing more is written for it. */
  forget(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    const e = this.#entries.get(key);
    if (e === undefined) return;
    e.forgotten = true;
    e.pending = undefined;
    this.#entries.delete(key);
  }

  /** Waits for the writes under way (tests). */
  async settled(): Promise<void> {
    while (this.#inflight.size > 0) await Promise.all([...this.#inflight]);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopping.abort();
    for (const e of this.#entries.values()) e.pending = undefined;
    await this.settled();
    this.#entries.clear();
  }

  #start(namespace: string, name: string, e: Entry): void {
    e.writing = true;
    const run = this.#drain(namespace, name, e).finally(() => {
      e.writing = false;
      this.#inflight.delete(run);
    });
    this.#inflight.add(run);
  }

  async #drain(namespace: string, name: string, e: Entry): Promise<void> {
    let failures = 0;
    while (e.pending !== undefined && !e.forgotten && !this.#stopped) {
      const want = e.pending;
      e.pending = undefined;
      try {
        await this.#write(namespace, name, want);
        e.published = want;
        failures = 0;
      } catch (err) {
        failures++;
        this.#o.onError?.(`${namespace}/${name}`, err);
        e.published = undefined;
        // Tried again unless a newer state came meanwhile; the wait grows, up to 30 s.
        e.pending ??= want;
        await sleep(Math.min((this.#o.retryMs ?? 1000) * 2 ** (failures - 1), 30_000), this.#stopping.signal);
      }
    }
  }

  async #write(namespace: string, name: string, want: Pending): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const cur = await this.#o.store.get('MessageQueueTrigger', namespace, name);
      // Deleted, or its spec moved on: the consumer of the new spec reports its own state.
      if (cur === undefined || cur.metadata.generation > want.generation) return;
      const next = nextStatus(cur.status, want.state, want.generation, (this.#o.now?.() ?? new Date()).toISOString());
      if (next === undefined) return;
      try {
        await this.#o.store.updateStatus<MessageQueueTrigger>({ ...cur, status: next });
        return;
      } catch (err) {
        if (isFlintError(err) && err.code === 'FLINT_ERR_NOT_FOUND') return;
        // Changed in between (a spec update, another writer): read it again.
        if (isFlintError(err) && err.code === 'FLINT_ERR_CONFLICT' && attempt < 5) continue;
        throw err;
      }
    }
  }
}
