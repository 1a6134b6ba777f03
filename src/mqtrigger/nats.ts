// The NATS JetStream connector: a topic is a subject, kept in the stream that
// already holds it (a user's `ORDERS` with `orders.>`), else in a stream of
// its own (FLINT_<subject>); a group is a durable pull consumer with explicit
// acks and one message in flight, so messages are handled in order and
// acknowledged only after their handler finished. A failed handler naks the
// message, which is delivered again to the group's next subscription.
// The message key travels in the header `Flint-Key`.
import { AckPolicy, DeliverPolicy, JetStreamApiCodes, JetStreamApiError, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import type { TlsMaterial } from '../api/tls-secret.ts';
import { natsTlsRefusal } from './nats-tls-refusal.ts';
import { type Connector, type OutgoingMessage, type QueueMessage, type SubscribeOptions, type Subscription, SubscriptionSet, handleFully } from './connector.ts';

const KEY_HEADER = 'Flint-Key';

export interface NatsOptions {
  servers: string[];
  user?: string;
  pass?: string;
  token?: string;
  /** CA and client certificate; without them TLS, when the server asks for it, trusts the system's CAs. */
  tls?: TlsMaterial;
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
  /** The stream that holds each topic's subject. */
  readonly #streams = new Map<string, string>();

  constructor(opts: NatsOptions) {
    this.#o = opts;
  }

  async #conn(): Promise<{ nc: NatsConnection; jsm: JetStreamManager }> {
    if (!this.#nc || this.#nc.isClosed()) {
      const { servers, user, pass, token, tls } = this.#o;
      try {
        this.#nc = await connect({ servers, user, pass, token, tls, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
      } catch (err) {
        const refusal = err instanceof Error && err.name === 'TimeoutError' ? await natsTlsRefusal(servers[0] ?? '', tls) : undefined;
        throw refusal === undefined ? err : new Error(`${servers[0]} refused the TLS connection`, { cause: refusal });
      }
      this.#jsm = await jetstreamManager(this.#nc);
    }
    return { nc: this.#nc, jsm: this.#jsm as JetStreamManager };
  }

  async ensureTopic(topic: string): Promise<void> {
    await this.#streamOf(topic);
  }

  /** The stream holding `topic`; a stream of its own is made when none does (adding an identical one twice is no error). */
  async #streamOf(topic: string): Promise<string> {
    const known = this.#streams.get(topic);
    if (known !== undefined) return known;
    const { jsm } = await this.#conn();
    let name: string;
    try {
      name = await jsm.streams.find(topic);
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)) throw err;
      name = streamName(topic);
      await jsm.streams.add({ name, subjects: [topic] });
    }
    this.#streams.set(topic, name);
    return name;
  }

  /**
   * The durable consumer `durable` of `stream` for `topic`, made when it does
   * not exist. One made elsewhere must be a pull consumer of `topic` alone,
   * or the handler would see other subjects' messages or none at all.
   */
  async #ensureConsumer(jsm: JetStreamManager, stream: string, durable: string, opts: SubscribeOptions): Promise<void> {
    let existing: Awaited<ReturnType<JetStreamManager['consumers']['info']>> | undefined;
    try {
      existing = await jsm.consumers.info(stream, durable);
    } catch {
      existing = undefined;
    }
    if (existing === undefined) {
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: opts.from === 'latest' ? DeliverPolicy.New : DeliverPolicy.All,
        filter_subject: opts.topic,
        max_ack_pending: 1,
        ack_wait: 30_000_000_000,
      });
      return;
    }
    const c = existing.config;
    const where = `consumer '${durable}' of stream '${stream}'`;
    if (c.deliver_subject) throw new Error(`${where} is a push consumer: name a pull consumer, or a new one, in the trigger's metadata consumer`);
    if (c.ack_policy !== AckPolicy.Explicit) throw new Error(`${where} acknowledges with '${c.ack_policy}': Flint needs explicit acks to lose no message`);
    const filters = c.filter_subjects ?? (c.filter_subject ? [c.filter_subject] : []);
    const subjects = filters.length > 0 ? filters : ((await jsm.streams.info(stream)).config.subjects ?? []);
    if (subjects.length !== 1 || subjects[0] !== opts.topic) {
      throw new Error(`${where} reads ${subjects.map((s) => `'${s}'`).join(', ') || 'no subject'}, not just the topic '${opts.topic}'`);
    }
  }

  /**
   * `use(stream)` with the stream holding `topic`. The stream remembered for
   * it may have been deleted, or replaced by another holding the subject:
   * on failure the topic's stream is looked up again, and `use` retried once.
   */
  async #inStreamOf<T>(topic: string, use: (stream: string) => Promise<T>): Promise<T> {
    const known = this.#streams.has(topic);
    try {
      return await use(await this.#streamOf(topic));
    } catch (err) {
      this.#streams.delete(topic);
      if (!known) throw err;
      return use(await this.#streamOf(topic));
    }
  }

  async publish(topic: string, msg: OutgoingMessage): Promise<void> {
    const h = natsHeaders();
    for (const [k, v] of Object.entries(msg.headers ?? {})) h.set(k, v);
    if (msg.key !== null && msg.key !== undefined) h.set(KEY_HEADER, msg.key.toString());
    const data = typeof msg.value === 'string' ? Buffer.from(msg.value) : msg.value;
    await this.#inStreamOf(topic, async () => {
      const { nc } = await this.#conn();
      // A stream made a moment ago (by this connector or another one racing it for the same
      // topic) can answer its first publish with "no responders"; nats.js retries those with backoff.
      await jetstream(nc).publish(topic, data, { headers: h, retries: 5 });
    });
  }

  async subscribe(opts: SubscribeOptions): Promise<Subscription> {
    const durable = durableName(opts.group);
    const consumer = await this.#inStreamOf(opts.topic, async (stream) => {
      const { nc, jsm } = await this.#conn();
      await this.#ensureConsumer(jsm, stream, durable, opts);
      return jetstream(nc).consumers.get(stream, durable);
    });
    const messages = await consumer.consume({ max_messages: 1 });
    let closing = false;
    // The client reconnects by itself, and the subscription lives on: the
    // trigger manager hears of the outage from the connection's events.
    const { nc } = await this.#conn();
    const events = nc.status();
    void (async () => {
      for await (const e of events) {
        if (e.type === 'disconnect') opts.onBrokerTrouble?.(`lost the connection to the NATS server ${e.server}; reconnecting`);
        else if (e.type === 'reconnect') opts.onBrokerTrouble?.(undefined);
      }
    })().catch(() => {});
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
    })().finally(() => {
      messages.stop();
      (events as { stop?: () => void }).stop?.();
    });
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
