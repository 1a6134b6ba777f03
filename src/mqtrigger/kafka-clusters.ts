// Which Kafka connector a trigger uses. Most use the install's broker
// (`kafka.brokers`); a trigger whose KEDA metadata names its own cluster
// (`bootstrapServers`) or whose secret holds credentials gets a connector of
// its own, shared with every trigger that names the same cluster and
// credentials, and closed when the last of them lets go.
import { type KafkaAuth, kafkaAuthFromSecret, kafkaTriggerSettings } from '../api/kafka-trigger.ts';
import type { MessageQueueTrigger, Secret } from '../api/kinds.ts';
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

export class KafkaClusters {
  readonly #make: (brokers: string[], auth: KafkaAuth) => Connector;
  readonly #open = new Map<string, { connector: Connector; users: number }>();

  constructor(make: (brokers: string[], auth: KafkaAuth) => Connector) {
    this.#make = make;
  }

  /** How many connectors are open (tests). */
  get size(): number {
    return this.#open.size;
  }

  acquire(brokers: string[], auth: KafkaAuth): ConnectorLease {
    // The same cluster whatever order its brokers are named in.
    const key = JSON.stringify([[...brokers].sort(), auth]);
    let entry = this.#open.get(key);
    if (entry === undefined) {
      entry = { connector: this.#make(brokers, auth), users: 0 };
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

export interface KafkaTriggerSources {
  /** The install's connector (`kafka.enabled`), and the brokers it uses. */
  install: Connector | undefined;
  installBrokers: string[];
  clusters: KafkaClusters;
  secret(namespace: string, name: string): Promise<Secret | undefined>;
}

/**
 * The connector for a Kafka trigger, or why it has none yet (a missing
 * secret, no broker at all). The secret is read on every call, so a consumer
 * that reconnects picks up changed credentials.
 */
export async function kafkaConnectorFor(t: MessageQueueTrigger, from: KafkaTriggerSources): Promise<ConnectorLease | string> {
  const settings = kafkaTriggerSettings(t.spec.metadata);
  let auth: KafkaAuth = {};
  const secretName = t.spec.secret;
  if (secretName) {
    const ns = t.metadata.namespace;
    const secret = await from.secret(ns, secretName);
    if (secret === undefined) return `secret '${secretName}' does not exist in namespace '${ns}'`;
    const read = kafkaAuthFromSecret(secret.data ?? {});
    if (typeof read === 'string') return `secret '${secretName}': ${read}`;
    auth = read;
  }
  const credentials = auth.sasl !== undefined || auth.tls !== undefined;
  const install = from.install;
  if (!credentials && install !== undefined && (settings.brokers === undefined || sameBrokers(settings.brokers, from.installBrokers))) {
    return sharedLease(install);
  }
  // Credentials alone go with the install's brokers, but only when Kafka is enabled there.
  const brokers = settings.brokers ?? (install === undefined ? undefined : from.installBrokers);
  if (brokers === undefined) return "no Kafka broker: set kafka.enabled=true and kafka.brokers, or the trigger's metadata bootstrapServers";
  return from.clusters.acquire(brokers, auth);
}
