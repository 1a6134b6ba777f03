// Which connector a trigger uses. Most use their broker's from the install
// values (`kafka.brokers`, `rabbitmq.url`, `redis.url`, `nats.servers`); a
// trigger whose metadata names its own server (Kafka's `bootstrapServers`,
// RabbitMQ's `host`, Redis's `address`, NATS's `natsServer`) or whose
// Kafka secret holds credentials gets a connector of its own, shared with
// every trigger that names the same server and credentials, and closed when
// the last of them lets go.
import { type KafkaAuth, kafkaAuthFromSecret, kafkaTriggerSettings } from '../api/kafka-trigger.ts';
import type { MessageQueueTrigger, Secret } from '../api/kinds.ts';
import { noBrokerReason } from '../api/mq-brokers.ts';
import { type NatsTriggerSettings, natsSettings } from '../api/nats-trigger.ts';
import { type QueueTriggerSettings, rabbitSettings, redisSettings } from '../api/queue-trigger.ts';
import type { TlsMaterial } from '../api/tls-secret.ts';
import type { Connector } from './connector.ts';

/** A connector lent to one trigger's consumer. */
export interface ConnectorLease {
  readonly connector: Connector;
  /** The consumer is done with it; safe to call more than once. */
  release(): Promise<void>;
}

/** A lease on a connector that someone else closes (the install's brokers). */
export function sharedLease(connector: Connector): ConnectorLease {
  return { connector, release: async () => {} };
}

/** Connectors of triggers' own servers, one per key (server and credentials), shared while anyone uses them. */
export class SharedConnectors {
  readonly #open = new Map<string, { connector: Connector; users: number }>();

  /** How many connectors are open (tests). */
  get size(): number {
    return this.#open.size;
  }

  /** The connector for `key`, made with `make` if no one holds it now. */
  acquire(key: string, make: () => Connector): ConnectorLease {
    let entry = this.#open.get(key);
    if (entry === undefined) {
      entry = { connector: make(), users: 0 };
      this.#open.set(key, entry);
    }
    const e = entry;
    e.users++;
    let released = false;
    return {
      connector: e.connector,
      release: async () => {
        if (released) return;
        released = true;
        e.users--;
        if (e.users > 0 || this.#open.get(key) !== e) return;
        this.#open.delete(key);
        await e.connector.close();
      },
    };
  }

  async close(): Promise<void> {
    const all = [...this.#open.values()];
    this.#open.clear();
    await Promise.all(all.map((e) => e.connector.close().catch(() => {})));
  }
}

function sameBrokers(a: string[], b: string[]): boolean {
  return a.length === b.length && [...a].sort().join(',') === [...b].sort().join(',');
}

export interface TriggerConnectorSources {
  /** The install's connector of each broker type that is enabled. */
  install: Partial<Record<MessageQueueTrigger['spec']['messageQueueType'], Connector>>;
  /** The brokers `kafka.brokers` names, for a Kafka trigger that brings only credentials. */
  installKafkaBrokers: string[];
  shared: SharedConnectors;
  secret(namespace: string, name: string): Promise<Secret | undefined>;
  makeKafka(brokers: string[], auth: KafkaAuth): Connector;
  makeRabbit(url: string, tls: TlsMaterial | undefined): Connector;
  makeRedis(url: string, tls: TlsMaterial | undefined): Connector;
  /** A connector for the trigger's own servers, with its credentials and TLS material. */
  makeNats(own: Required<Pick<NatsTriggerSettings, 'servers'>> & Pick<NatsTriggerSettings, 'auth' | 'tls'>): Connector;
}

/** The trigger's secret's data, or why it cannot be had; undefined when it names none. */
async function secretData(t: MessageQueueTrigger, from: TriggerConnectorSources): Promise<Record<string, string> | undefined | string> {
  const name = t.spec.secret;
  if (!name) return undefined;
  const ns = t.metadata.namespace;
  const secret = await from.secret(ns, name);
  if (secret === undefined) return `secret '${name}' does not exist in namespace '${ns}'`;
  return secret.data ?? {};
}

/**
 * The connector for a trigger, or why it has none yet (a missing secret, no
 * broker at all). The secret is read on every call, so a consumer that
 * reconnects picks up changed credentials.
 */
export async function connectorFor(t: MessageQueueTrigger, from: TriggerConnectorSources): Promise<ConnectorLease | string> {
  const type = t.spec.messageQueueType;
  if (type === 'kafka') return kafkaConnectorFor(t, from);
  const data = await secretData(t, from);
  if (typeof data === 'string') return data;
  if (type === 'nats-jetstream') return natsConnectorFor(t, data, from);
  let own: QueueTriggerSettings | string = {};
  if (type === 'rabbitmq') own = rabbitSettings(t.spec.metadata, data);
  else if (type === 'redis') own = redisSettings(t.spec.metadata, data);
  if (typeof own === 'string') return `secret '${t.spec.secret}': ${own}`;
  const { url, tls } = own;
  if (url !== undefined) {
    const make = type === 'rabbitmq' ? () => from.makeRabbit(url, tls) : () => from.makeRedis(url, tls);
    return from.shared.acquire(`${type} ${JSON.stringify([url, tls ?? null])}`, make);
  }
  return installLease(type, from);
}

/** The install's connector of a broker type, or what to set when there is none. */
function installLease(type: Exclude<MessageQueueTrigger['spec']['messageQueueType'], 'kafka'>, from: TriggerConnectorSources): ConnectorLease | string {
  const install = from.install[type];
  return install === undefined ? noBrokerReason(type) : sharedLease(install);
}

function natsConnectorFor(t: MessageQueueTrigger, secret: Record<string, string> | undefined, from: TriggerConnectorSources): ConnectorLease | string {
  const own = natsSettings(t.spec.metadata, secret);
  if (typeof own === 'string') return `secret '${t.spec.secret}': ${own}`;
  const { servers, auth, tls } = own;
  if (servers !== undefined) {
    return from.shared.acquire(`nats ${JSON.stringify([[...servers].sort(), auth ?? null, tls ?? null])}`, () => from.makeNats({ servers, auth, tls }));
  }
  return installLease('nats-jetstream', from);
}

/**
 * The connector for a Kafka trigger, or why it has none yet (a missing
 * secret, no broker at all). The secret is read on every call, so a consumer
 * that reconnects picks up changed credentials.
 */
async function kafkaConnectorFor(t: MessageQueueTrigger, from: TriggerConnectorSources): Promise<ConnectorLease | string> {
  const settings = kafkaTriggerSettings(t.spec.metadata);
  const data = await secretData(t, from);
  if (typeof data === 'string') return data;
  let auth: KafkaAuth = {};
  if (data !== undefined) {
    const read = kafkaAuthFromSecret(data);
    if (typeof read === 'string') return `secret '${t.spec.secret}': ${read}`;
    auth = read;
  }
  const credentials = auth.sasl !== undefined || auth.tls !== undefined;
  const install = from.install.kafka;
  if (!credentials && install !== undefined && (settings.brokers === undefined || sameBrokers(settings.brokers, from.installKafkaBrokers))) {
    return sharedLease(install);
  }
  // Credentials alone go with the install's brokers, but only when Kafka is enabled there.
  const brokers = settings.brokers ?? (install === undefined ? undefined : from.installKafkaBrokers);
  if (brokers === undefined) return noBrokerReason('kafka');
  // The same cluster whatever order its brokers are named in.
  const key = `kafka ${JSON.stringify([[...brokers].sort(), auth])}`;
  return from.shared.acquire(key, () => from.makeKafka(brokers, auth));
}
