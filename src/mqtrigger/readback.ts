// Topic read-back for the controller's `/topics/<topic>/messages` endpoint:
// one long-lived consumer per (topic, group); a message is committed only once
// the reader says its reply went out, so a poll that times out, or whose
// client left first, or whose reply could not be written, loses nothing.
import type { Connector, OutgoingMessage, QueueMessage, Subscription } from './connector.ts';

const IDLE_CLOSE_MS = 60_000;

/** A message the consumer waits on: `take` commits it, `drop` gives it back to the group uncommitted. */
interface Held {
  msg: QueueMessage;
  take: () => void;
  drop: (err: Error) => void;
}

/** A message handed to a reader, held until the reader settles it. */
export interface Delivery {
  readonly message: QueueMessage;
  /** The reply went out: the group moves past this message. */
  commit(): void;
  /** The reply did not go out: the group's next read gets this message. */
  giveBack(): void;
}

interface Reader {
  sub?: Subscription;
  opening?: Promise<void>;
  /** Messages received and not yet handed out, in order. */
  ready: Held[];
  /** Messages handed out and not yet settled. */
  out: Set<Held>;
  /** Long-polls in order; called with undefined when the wait ends without a message. */
  waiting: Array<(h: Held | undefined) => void>;
  lastUsed: number;
  closed: boolean;
}

/** A received or given-back message: to the longest waiting poll, else first in line. */
function hand(r: Reader, held: Held, front: boolean): void {
  if (r.closed) {
    held.drop(new Error('topic read-back closed'));
    return;
  }
  const w = r.waiting.shift();
  if (w) w(held);
  else if (front) r.ready.unshift(held);
  else r.ready.push(held);
}

function deliver(r: Reader, held: Held): Delivery {
  r.out.add(held);
  let settled = false;
  const settle = () => {
    if (settled) return false;
    settled = true;
    r.out.delete(held);
    return true;
  };
  return {
    message: held.msg,
    commit: () => {
      if (settle()) held.take();
    },
    giveBack: () => {
      if (settle()) hand(r, held, true);
    },
  };
}

/**
 * A reader's consumer waits on the message it holds until a reader takes it;
 * closing must give that message back first, or the close would wait forever.
 */
async function closeReader(r: Reader): Promise<void> {
  // From here on onMessage drops what arrives, so one pass over the held messages is enough.
  r.closed = true;
  for (const w of r.waiting.splice(0)) w(undefined);
  for (const held of [...r.ready.splice(0), ...r.out]) held.drop(new Error('topic read-back closed'));
  r.out.clear();
  await r.opening;
  await r.sub?.close();
}

export class TopicReadback {
  readonly #connector: () => Connector | undefined;
  readonly #readers = new Map<string, Reader>();
  readonly #sweeper: NodeJS.Timeout;
  #closed = false;

  constructor(connector: () => Connector | undefined) {
    this.#connector = connector;
    this.#sweeper = setInterval(() => this.#sweep(), 10_000);
    this.#sweeper.unref();
  }

  get available(): boolean {
    return this.#connector() !== undefined;
  }

  async produce(topic: string, msg: OutgoingMessage): Promise<void> {
    const c = this.#connector();
    if (!c) throw new Error('no Kafka broker is configured (kafka.enabled=false)');
    await c.publish(topic, msg);
  }

  /**
   * The group's next message, or undefined when none arrives within
   * timeoutMs or `signal` aborts first (the client left: the message stays
   * for the group's next read). The caller must commit or give back the
   * delivery: until then the consumer waits on it.
   */
  async read(topic: string, group: string, timeoutMs: number, signal?: AbortSignal): Promise<Delivery | undefined> {
    const c = this.#connector();
    if (!c) throw new Error('no Kafka broker is configured (kafka.enabled=false)');
    // A consumer opened now would never be closed.
    if (this.#closed) throw new Error('topic read-back is closed');
    if (signal?.aborted) return undefined;
    const key = `${topic}\u0000${group}`;
    // One Kafka group per (group, topic): members of one group that subscribe
    // to different topics make the group rebalance between them, and a
    // reader would then wait on partitions handed to another.
    const kafkaGroup = `${group}.${topic}`;
    let r = this.#readers.get(key);
    if (!r) {
      r = { ready: [], out: new Set(), waiting: [], lastUsed: Date.now(), closed: false };
      this.#readers.set(key, r);
      const reader = r;
      reader.opening = c
        .subscribe({
          topic,
          group: kafkaGroup,
          onMessage: (msg) =>
            new Promise<void>((take, drop) => {
              hand(reader, { msg, take, drop }, false);
            }),
        })
        .then((sub) => {
          reader.sub = sub;
          const forget = () => {
            if (this.#readers.get(key) === reader) this.#readers.delete(key);
          };
          sub.done.then(forget, forget);
        }, () => {
          this.#readers.delete(key);
        });
    }
    r.lastUsed = Date.now();
    const first = r.ready.shift();
    if (first) return deliver(r, first);
    const reader = r;
    return new Promise((resolve) => {
      const waiter = (h: Held | undefined) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', giveUp);
        resolve(h === undefined ? undefined : deliver(reader, h));
      };
      const giveUp = () => {
        const i = reader.waiting.indexOf(waiter);
        if (i >= 0) reader.waiting.splice(i, 1);
        waiter(undefined);
      };
      const timer = setTimeout(giveUp, timeoutMs);
      signal?.addEventListener('abort', giveUp, { once: true });
      reader.waiting.push(waiter);
    });
  }

  #sweep(): void {
    const cutoff = Date.now() - IDLE_CLOSE_MS;
    for (const [k, r] of this.#readers) {
      if (r.lastUsed < cutoff && r.waiting.length === 0 && r.out.size === 0) {
        this.#readers.delete(k);
        void closeReader(r).catch(() => {});
      }
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    const all = [...this.#readers.values()];
    this.#readers.clear();
    await Promise.all(all.map(closeReader));
  }
}
