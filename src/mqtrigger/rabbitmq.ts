// The RabbitMQ connector: a topic is a durable queue. Consumers take one
// message at a time (prefetch 1) and ack it only after its handler finished;
// a failed handler nacks it back to the queue, and a consumer that goes away
// leaves its unacked message to be delivered again. Publishing waits for the
// broker's confirm. Queues are competing consumers: every subscription to a
// topic shares its messages whatever its group (the group names the consumer).
// The message key travels in the header `flint-key`.
import type { ConnectionOptions } from 'node:tls';
import amqp from 'amqplib';
import type { TlsMaterial } from '../api/tls-secret.ts';
import { type Connector, type OutgoingMessage, type QueueMessage, type SubscribeOptions, type Subscription, SubscriptionSet, handleFully } from './connector.ts';

const KEY_HEADER = 'flint-key';

export interface RabbitOptions {
  url: string;
  /** For an amqps:// url: the server's CA and a client certificate (PEM), else the system's CAs. */
  tls?: TlsMaterial;
}

/** amqplib hands its socket options to tls.connect for an amqps:// url. */
function tlsOptions(tls: TlsMaterial | undefined): ConnectionOptions | undefined {
  return tls === undefined ? undefined : { ca: tls.ca === undefined ? undefined : [tls.ca], cert: tls.cert, key: tls.key };
}

type Connection = Awaited<ReturnType<typeof amqp.connect>>;
type ConfirmChannel = Awaited<ReturnType<Connection['createConfirmChannel']>>;

export class RabbitConnector implements Connector {
  readonly #o: RabbitOptions;
  #conn: Connection | undefined;
  #pub: ConfirmChannel | undefined;
  readonly #subs = new SubscriptionSet();

  constructor(opts: RabbitOptions) {
    this.#o = opts;
  }

  async #connection(): Promise<Connection> {
    if (!this.#conn) {
      const conn = await amqp.connect(this.#o.url, tlsOptions(this.#o.tls));
      conn.on('error', () => {});
      conn.on('close', () => {
        if (this.#conn === conn) {
          this.#conn = undefined;
          this.#pub = undefined;
        }
      });
      this.#conn = conn;
    }
    return this.#conn;
  }

  async ensureTopic(topic: string): Promise<void> {
    const ch = await (await this.#connection()).createChannel();
    try {
      await ch.assertQueue(topic, { durable: true });
    } finally {
      await ch.close().catch(() => {});
    }
  }

  async publish(topic: string, msg: OutgoingMessage): Promise<void> {
    if (!this.#pub) {
      const ch = await (await this.#connection()).createConfirmChannel();
      ch.on('error', () => {});
      this.#pub = ch;
    }
    const ch = this.#pub;
    await ch.assertQueue(topic, { durable: true });
    const headers: Record<string, string> = { ...msg.headers };
    if (msg.key !== null && msg.key !== undefined) headers[KEY_HEADER] = msg.key.toString();
    const body = typeof msg.value === 'string' ? Buffer.from(msg.value) : msg.value;
    ch.sendToQueue(topic, body, { persistent: true, headers });
    await ch.waitForConfirms();
  }

  async subscribe(opts: SubscribeOptions): Promise<Subscription> {
    const conn = await this.#connection();
    const ch = await conn.createChannel();
    ch.on('error', () => {});
    await ch.assertQueue(opts.topic, { durable: true });
    await ch.prefetch(1);
    let closing = false;
    let finish!: (err?: Error) => void;
    const done = new Promise<void>((resolve, reject) => {
      finish = (err) => (err ? reject(err) : resolve());
    });
    // Closed by anyone but close(): the broker went away or shut the channel.
    ch.on('close', () => finish(closing ? undefined : new Error('the connection to RabbitMQ closed')));
    const { consumerTag } = await ch.consume(opts.topic, (m) => {
      if (!m) {
        finish(new Error('the broker cancelled the consumer'));
        return;
      }
      const headers: Record<string, string> = {};
      let key: Buffer | null = null;
      for (const [k, v] of Object.entries(m.properties.headers ?? {})) {
        if (k === KEY_HEADER) key = Buffer.from(String(v));
        else headers[k] = String(v);
      }
      const msg: QueueMessage = { key, value: m.content, headers, partition: 0, offset: String(m.fields.deliveryTag) };
      handleFully(opts.onMessage, msg).then(
        () => {
          if (!closing) ch.ack(m);
          else ch.nack(m, false, true);
        },
        (err) => {
          ch.nack(m, false, true);
          finish(err as Error);
          void ch.close().catch(() => {});
        },
      );
    }, { consumerTag: `${opts.group}-${Math.random().toString(36).slice(2, 8)}` });
    return this.#subs.track(done, async () => {
      closing = true;
      await ch.cancel(consumerTag).catch(() => {});
      await ch.close().catch(() => {});
    });
  }

  async close(): Promise<void> {
    await this.#subs.closeAll();
    await this.#pub?.close().catch(() => {});
    await this.#conn?.close().catch(() => {});
    this.#conn = undefined;
    this.#pub = undefined;
  }
}
