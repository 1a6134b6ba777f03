// The Kafka connector, on @platformatic/kafka. Consumers never autocommit:
// a message's offset is committed only after its handler has finished, so a
// crash or a broker restart redelivers it instead of losing it.
import { Admin, Consumer, type Message, Producer } from '@platformatic/kafka';
import type { KafkaAuth } from '../api/kafka-trigger.ts';
import { type Connector, type OutgoingMessage, type QueueMessage, type SubscribeOptions, type Subscription, SubscriptionSet } from './connector.ts';

export interface KafkaOptions {
  brokers: string[];
  clientId?: string;
  /** SASL and TLS, as a trigger's secret gives them. */
  auth?: KafkaAuth;
}

function toBuffer(v: Buffer | string | null | undefined): Buffer | undefined {
  if (v === null || v === undefined) return undefined;
  return typeof v === 'string' ? Buffer.from(v) : v;
}

function headersOf(m: Message): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of m.headers) out[k.toString()] = v === undefined || v === null ? '' : Buffer.from(v as Buffer).toString();
  return out;
}

export class KafkaConnector implements Connector {
  readonly #o: KafkaOptions;
  #producer: Producer | undefined;
  readonly #subs = new SubscriptionSet();
  /** Topics known to exist: publishing to a missing one would race its creation. */
  readonly #topics = new Set<string>();

  constructor(opts: KafkaOptions) {
    this.#o = opts;
  }

  #base(suffix: string) {
    const auth = this.#o.auth;
    return {
      clientId: `${this.#o.clientId ?? 'flint'}-${suffix}`,
      bootstrapBrokers: this.#o.brokers,
      retries: 5,
      retryDelay: 500,
      ...(auth?.sasl ? { sasl: auth.sasl } : {}),
      ...(auth?.tls ? { tls: auth.tls } : {}),
    };
  }

  async ensureTopic(topic: string): Promise<void> {
    if (this.#topics.has(topic)) return;
    const admin = new Admin(this.#base('admin'));
    try {
      await admin.createTopics({ topics: [topic], partitions: 1, replicas: 1 });
    } catch (err) {
      const text = `${(err as Error).message} ${JSON.stringify((err as { errors?: unknown }).errors ?? '')}`;
      if (!/exist/i.test(text)) throw err;
    } finally {
      await admin.close().catch(() => {});
    }
    this.#topics.add(topic);
  }

  async publish(topic: string, msg: OutgoingMessage): Promise<void> {
    await this.ensureTopic(topic);
    this.#producer ??= new Producer({ ...this.#base('producer'), autocreateTopics: true });
    const headers = new Map<Buffer, Buffer>();
    for (const [k, v] of Object.entries(msg.headers ?? {})) headers.set(Buffer.from(k), Buffer.from(v));
    await this.#producer.send({
      messages: [{ topic, key: toBuffer(msg.key), value: toBuffer(msg.value) as Buffer, headers }],
      acks: -1,
    } as never);
  }

  async subscribe(opts: SubscribeOptions): Promise<Subscription> {
    // A group that joins before its topic exists gets no partitions and is
    // not told when the topic appears: create it first.
    await this.ensureTopic(opts.topic);
    const consumer = new Consumer({ ...this.#base(`consumer-${opts.group}`), groupId: opts.group, autocommit: false, sessionTimeout: 10_000, heartbeatInterval: 1000, autocreateTopics: true });
    const stream = await consumer.consume({
      topics: [opts.topic],
      autocommit: false,
      mode: 'committed',
      fallbackMode: opts.from ?? 'earliest',
      maxWaitTime: 500,
    } as never);
    let closing = false;
    let commits: Promise<unknown> = Promise.resolve();
    let commitError: Error | undefined;
    // Settles when every message so far has settled and its commit is queued.
    let tail: Promise<void> = Promise.resolve();
    const done = (async () => {
      try {
        for await (const m of stream as AsyncIterable<Message>) {
          const msg: QueueMessage = {
            key: m.key && (m.key as Buffer).length > 0 ? Buffer.from(m.key as Buffer) : null,
            value: m.value ? Buffer.from(m.value as Buffer) : Buffer.alloc(0),
            headers: headersOf(m),
            partition: m.partition,
            offset: m.offset.toString(),
          };
          const handled = await opts.onMessage(msg);
          // Awaited below unless an earlier message failed first; never left unhandled.
          handled?.settled.catch(() => {});
          // This message's background work (publishing an answer) may run
          // while the next message is handled; its commit waits for that
          // and for every earlier message, so offsets only move forward.
          // Commits themselves may land in the background: one lost to a
          // crash means the message comes again (at least once).
          const before = tail;
          tail = (async () => {
            await before;
            if (handled) await handled.settled;
            commits = commits.then(() => m.commit()).catch((err) => {
              commitError = err as Error;
            });
          })();
          tail.catch(() => {});
          // At most one message settles behind the one being handled.
          await before;
          if (commitError) throw commitError;
          if (closing) break;
        }
        await tail;
      } finally {
        // Let the messages in hand settle (an answer still being published
        // must not land after the next consumer's) and their commits land,
        // but never wait on a broker that is gone: a consumer that does not
        // close keeps its partitions from the next one.
        const limit = new Promise((r) => setTimeout(r, 3000).unref());
        await Promise.race([tail.catch(() => {}).then(() => commits), limit]);
        await stream.close().catch(() => {});
        await Promise.resolve(consumer.close(true)).catch(() => {});
      }
    })();
    return this.#subs.track(done, async () => {
      closing = true;
      await stream.close().catch(() => {});
    });
  }

  async close(): Promise<void> {
    await this.#subs.closeAll();
    await this.#producer?.close().catch(() => {});
    this.#producer = undefined;
  }
}
