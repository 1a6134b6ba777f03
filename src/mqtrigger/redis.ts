// The Redis Streams connector: a topic is a stream, a group a consumer group.
// Entries are acknowledged (XACK) only after their handler finished; entries
// a stopped consumer left pending are claimed first when the group resumes,
// so nothing is lost and order within the stream holds.
// An entry holds the fields `value` (base64 of the body), `key` and `headers`
// (JSON), so any bytes survive the trip.
import { randomBytes } from 'node:crypto';
import { createClient } from '@redis/client';
import type { TlsMaterial } from '../api/tls-secret.ts';
import { probeRedisTls } from './redis-tls-probe.ts';
import { type Connector, type OutgoingMessage, type QueueMessage, type SubscribeOptions, type Subscription, SubscriptionSet, handleFully } from './connector.ts';

/** The part of the client this connector uses. */
interface Client {
  sendCommand(args: string[]): Promise<unknown>;
  disconnect(): Promise<void>;
}
type Entry = [id: string, fields: string[]];

export interface RedisOptions {
  url: string;
  /** For a rediss:// url: the server's CA and a client certificate (PEM), else the system's CAs. */
  tls?: TlsMaterial;
}

function toMessage([id, fields]: Entry): QueueMessage {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]] = fields[i + 1];
  let headers: Record<string, string> = {};
  try {
    headers = f.headers ? (JSON.parse(f.headers) as Record<string, string>) : {};
  } catch {
    headers = {};
  }
  // Entries written by other producers may carry a plain-text `value`.
  const value = f.enc === 'base64' ? Buffer.from(f.value ?? '', 'base64') : Buffer.from(f.value ?? '');
  return { key: f.key !== undefined && f.key !== '' ? Buffer.from(f.key) : null, value, headers, partition: 0, offset: id };
}

export class RedisConnector implements Connector {
  readonly #o: RedisOptions;
  #client: Client | undefined;
  readonly #subs = new SubscriptionSet();

  constructor(opts: RedisOptions) {
    this.#o = opts;
  }

  async #connect(): Promise<Client> {
    const reconnectStrategy = (n: number) => Math.min(100 * 2 ** n, 5000);
    const tls = this.#o.tls;
    const url = new URL(this.#o.url);
    if (url.protocol === 'rediss:') await probeRedisTls(url, tls);
    const socket = tls === undefined ? { reconnectStrategy } : { reconnectStrategy, tls: true as const, ca: tls.ca, cert: tls.cert, key: tls.key };
    const c = createClient({ url: this.#o.url, socket });
    c.on('error', () => {
      // Reconnection is the client's job; a consumer loop notices failed commands.
    });
    await c.connect();
    return c as unknown as Client;
  }

  async #shared(): Promise<Client> {
    this.#client ??= await this.#connect();
    return this.#client;
  }

  async ensureTopic(_topic: string): Promise<void> {
    // Streams come into being with their first entry or group.
  }

  async publish(topic: string, msg: OutgoingMessage): Promise<void> {
    const c = await this.#shared();
    const value = typeof msg.value === 'string' ? Buffer.from(msg.value) : msg.value;
    const args = ['XADD', topic, '*', 'value', value.toString('base64'), 'enc', 'base64'];
    if (msg.key !== null && msg.key !== undefined) args.push('key', msg.key.toString());
    if (msg.headers && Object.keys(msg.headers).length > 0) args.push('headers', JSON.stringify(msg.headers));
    await c.sendCommand(args);
  }

  async subscribe(opts: SubscribeOptions): Promise<Subscription> {
    // Blocking reads need a connection of their own.
    const c = await this.#connect();
    try {
      await c.sendCommand(['XGROUP', 'CREATE', opts.topic, opts.group, opts.from === 'latest' ? '$' : '0', 'MKSTREAM']);
    } catch (err) {
      if (!String((err as Error).message).includes('BUSYGROUP')) {
        await c.disconnect().catch(() => {});
        throw err;
      }
    }
    const consumer = `flint-${randomBytes(4).toString('hex')}`;
    let closing = false;
    const handle = async (entries: Entry[]) => {
      for (const e of entries) {
        if (closing) return;
        await handleFully(opts.onMessage, toMessage(e));
        await c.sendCommand(['XACK', opts.topic, opts.group, e[0]]);
      }
    };
    const done = (async () => {
      try {
        // First whatever an earlier consumer of the group left unacknowledged.
        let cursor = '0-0';
        do {
          const r = (await c.sendCommand(['XAUTOCLAIM', opts.topic, opts.group, consumer, '0', cursor, 'COUNT', '100'])) as [string, Entry[]];
          cursor = r[0];
          await handle(r[1].filter((e) => e !== null && Array.isArray(e[1])));
        } while (cursor !== '0-0' && !closing);
        while (!closing) {
          const r = (await c.sendCommand(['XREADGROUP', 'GROUP', opts.group, consumer, 'COUNT', '16', 'BLOCK', '500', 'STREAMS', opts.topic, '>'])) as Array<
            [string, Entry[]]
          > | null;
          if (r) for (const [, entries] of r) await handle(entries);
        }
      } catch (err) {
        // The trigger's status shows this: say which server (never its credentials).
        throw closing ? err : new Error(`Redis server ${new URL(this.#o.url).host}`, { cause: err });
      } finally {
        await c.disconnect().catch(() => {});
      }
    })();
    return this.#subs.track(done, async () => {
      closing = true;
    });
  }

  async close(): Promise<void> {
    await this.#subs.closeAll();
    await this.#client?.disconnect().catch(() => {});
    this.#client = undefined;
  }
}
