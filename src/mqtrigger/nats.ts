// The NATS JetStream connector: a topic is a subject, kept in a stream of its
// own (FLINT_<subject>); a group is a durable pull consumer with explicit
// acks and one message in flight, so messages are handled in order and
// acknowledged only after their handler finished. A failed handler naks the
// message, which is delivered again to the group's next subscription.
// The message key travels in the header `Flint-Key`.
import { AckPolicy, DeliverPolicy, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { type Connector, type OutgoingMessage, type QueueMessage, type SubscribeOptions, type Subscription, SubscriptionSet, handleFully } from './connector.ts';

const KEY_HEADER = 'Flint-Key';

export interface NatsOptions {
  servers: string[];
}

export function streamName(topic: string): string {
  return `FLINT_${topic.replace(/[^A-Za-z0-9_-]/g, '_')}`;
}

function durableName(group: string): string {
  return group.replace(/[^A-Za-z0-9_-]/g, '_');
}

export class NatsConnector implements Connector {
  readonly #o: NatsOptions;
  #nc: NatsConnection | undefined;
  #jsm: JetStreamManager | undefined;
  readonly #subs = new SubscriptionSet();
  readonly #streams = new Set<string>();

  constructor(opts: NatsOptions) {
    this.#o = opts;
  }

  async #conn(): Promise<{ nc: NatsConnection; jsm: JetStreamManager }> {
    if (!this.#nc || this.#nc.isClosed()) {
      this.#nc = await connect({ servers: this.#o.servers, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
      this.#jsm = await jetstreamManager(this.#nc);
    }
    return { nc: this.#nc, jsm: this.#jsm as JetStreamManager };
  }

  async ensureTopic(topic: string): Promise<void> {
    if (this.#streams.has(topic)) return;
    const { jsm } = await this.#conn();
    const name = streamName(topic);
    try {
      await jsm.streams.info(name);
    } catch {
      await jsm.streams.add({ name, subjects: [topic] });
    }
    this.#streams.add(topic);
  }

  async publish(topic: string, msg: OutgoingMessage): Promise<void> {
    await this.ensureTopic(topic);
    const { nc } = await this.#conn();
    const h = natsHeaders();
    for (const [k, v] of Object.entries(msg.headers ?? {})) h.set(k, v);
    if (msg.key !== null && msg.key !== undefined) h.set(KEY_HEADER, msg.key.toString());
    const data = typeof msg.value === 'string' ? Buffer.from(msg.value) : msg.value;
    await jetstream(nc).publish(topic, data, { headers: h });
  }

  async subscribe(opts: SubscribeOptions): Promise<Subscription> {
    await this.ensureTopic(opts.topic);
    const { nc, jsm } = await this.#conn();
    const stream = streamName(opts.topic);
    const durable = durableName(opts.group);
    try {
      await jsm.consumers.info(stream, durable);
    } catch {
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: opts.from === 'latest' ? DeliverPolicy.New : DeliverPolicy.All,
        filter_subject: opts.topic,
        max_ack_pending: 1,
        ack_wait: 30_000_000_000,
      });
    }
    const consumer = await jetstream(nc).consumers.get(stream, durable);
    const messages = await consumer.consume({ max_messages: 1 });
    let closing = false;
    const done = (async () => {
      for await (const m of messages) {
        const h: Record<string, string> = {};
        let key: Buffer | null = null;
        if (m.headers) {
          for (const [k, v] of m.headers) {
            if (k === KEY_HEADER) key = Buffer.from(v[0] ?? '');
            else h[k] = v[0] ?? '';
          }
        }
        const msg: QueueMessage = { key, value: Buffer.from(m.data), headers: h, partition: 0, offset: String(m.seq) };
        try {
          await handleFully(opts.onMessage, msg);
        } catch (err) {
          m.nak();
          throw err;
        }
        await m.ackAck();
        if (closing) break;
      }
    })().finally(() => messages.stop());
    return this.#subs.track(done, async () => {
      closing = true;
      messages.stop();
    });
  }

  async close(): Promise<void> {
    await this.#subs.closeAll();
    await this.#nc?.close().catch(() => {});
    this.#nc = undefined;
    this.#streams.clear();
  }
}
