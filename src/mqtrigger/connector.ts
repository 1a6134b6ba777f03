// The one interface every message broker sits behind. The trigger manager
// and the read-back endpoint use only this; a connector's insides stay private.

export interface QueueMessage {
  key: Buffer | null;
  value: Buffer;
  headers: Record<string, string>;
  partition: number;
  /** Decimal string: Kafka offsets are 64-bit. */
  offset: string;
}

export interface OutgoingMessage {
  key?: Buffer | string | null;
  value: Buffer | string;
  headers?: Record<string, string>;
}

/**
 * What a handler may resolve to when part of its work can finish in the
 * background (the trigger manager publishing a function's answer while the
 * next message is already being handled).
 */
export interface Handled {
  /**
   * The message is committed only after this resolves; a rejection stops the
   * subscription like a thrown error, and neither this message nor any later
   * one is committed.
   */
  readonly settled: Promise<void>;
}

export interface SubscribeOptions {
  /** Consumer group: each group sees every message once. */
  group: string;
  topic: string;
  /**
   * Called for each message, one at a time per partition, in order: the call
   * for a message starts only after the previous one's promise resolved. The
   * message is committed (acknowledged) only after the promise resolves and,
   * when it resolves to a Handled, after `settled` resolves too; commits
   * follow message order. A connector may call onMessage for the next message
   * while the previous one settles. A rejection stops the subscription
   * without committing, so the message is delivered again (at-least-once).
   */
  onMessage(msg: QueueMessage): Promise<void> | Promise<Handled | undefined>;
  /** Where to start when the group has no committed position. */
  from?: 'earliest' | 'latest';
  /**
   * For a subscription that lives through a broker outage (its client
   * reconnects by itself): told why when it loses the broker, and undefined
   * when it has it back. A subscription that ends with the outage (its
   * `done` settles) need not call it.
   */
  onBrokerTrouble?(problem: string | undefined): void;
}

export interface Subscription {
  /** Stops consuming; a message in progress finishes first. */
  close(): Promise<void>;
  /** Settles when the subscription stops on its own (broker gone, handler error). */
  readonly done: Promise<void>;
}

export interface Connector {
  subscribe(opts: SubscribeOptions): Promise<Subscription>;
  publish(topic: string, msg: OutgoingMessage): Promise<void>;
  /** Makes sure a topic exists (brokers that need topics declared). */
  ensureTopic(topic: string): Promise<void>;
  close(): Promise<void>;
}

/** Waits for all of a handler's work: for connectors that handle one message at a time. */
export async function handleFully(onMessage: SubscribeOptions['onMessage'], msg: QueueMessage): Promise<void> {
  const handled = await onMessage(msg);
  if (handled) await handled.settled;
}

/**
 * A connector's set of live subscriptions: each leaves the set when it stops
 * on its own or is closed, so the connector's close() stops what is left.
 */
export class SubscriptionSet {
  readonly #subs = new Set<Subscription>();

  /** Wraps `done` and `stop` into a Subscription tracked by this set. */
  track(done: Promise<void>, stop: () => Promise<void>): Subscription {
    const sub: Subscription = {
      done,
      close: async () => {
        await stop();
        await done.catch(() => {});
        this.#subs.delete(sub);
      },
    };
    this.#subs.add(sub);
    const forget = () => this.#subs.delete(sub);
    done.then(forget, forget);
    return sub;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#subs].map((s) => s.close()));
  }
}
