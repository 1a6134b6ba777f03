// What a Kafka trigger's KEDA metadata and secret say, read the way KEDA's
// Kafka scaler reads them, so a trigger written for Fission's KEDA
// connectors means the same here: which cluster (`bootstrapServers`), which
// consumer group (`consumerGroup`), where a new group starts
// (`offsetResetPolicy`), and how to authenticate (the secret's `sasl`,
// `username`, `password`, `tls`, `ca`, `cert`, `key`). Other metadata keys
// (`lagThreshold` and the like) are KEDA's scaling settings: kept, not read.

import { type TlsMaterial, tlsFromSecret } from './tls-secret.ts';

/** The metadata keys read here; `topic` only has to agree with spec.topic. */
export const KAFKA_METADATA_KEYS = ['bootstrapServers', 'consumerGroup', 'offsetResetPolicy', 'topic'] as const;

export type SaslMechanism = 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512';

/** KEDA's `sasl` values and the mechanisms they name. */
const SASL_MECHANISMS: Record<string, SaslMechanism | undefined> = {
  plaintext: 'PLAIN',
  scram_sha256: 'SCRAM-SHA-256',
  scram_sha512: 'SCRAM-SHA-512',
};

export interface KafkaTriggerSettings {
  /** The trigger's own cluster; undefined: the install's `kafka.brokers`. */
  brokers?: string[];
  /** The trigger's own consumer group; undefined: Flint's per-trigger default. */
  group?: string;
  /** Where a group with no committed offset starts. */
  from: 'earliest' | 'latest';
}

export interface KafkaAuth {
  sasl?: { mechanism: SaslMechanism; username: string; password: string };
  /** TLS to the brokers; PEM material when the secret gives it (else the system's CAs). */
  tls?: TlsMaterial;
}

/** A problem with one field, for the API's 400 (or a trigger's log line). */
export interface FieldProblem {
  field: string;
  message: string;
}

const BROKER_RE = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?):(\d{1,5})$/;

function brokerList(value: string): string[] | string {
  const list = value
    .split(',')
    .map((b) => b.trim())
    .filter((b) => b !== '');
  if (list.length === 0) return 'names no broker: use host:port[,host:port...]';
  for (const b of list) {
    const m = BROKER_RE.exec(b);
    if (m === null || Number(m[3]) < 1 || Number(m[3]) > 65535) return `'${b}' is not host:port`;
  }
  return list;
}

/** Checks the metadata keys read here; undefined when they are fine (or absent). */
export function kafkaMetadataProblem(metadata: Record<string, string> | undefined, topic: string): FieldProblem | undefined {
  if (metadata === undefined) return undefined;
  const at = (key: string) => `spec.metadata.${key}`;
  const servers = metadata.bootstrapServers;
  if (servers !== undefined) {
    const list = brokerList(servers);
    if (typeof list === 'string') return { field: at('bootstrapServers'), message: list };
  }
  const group = metadata.consumerGroup;
  if (group !== undefined && (group === '' || group.length > 255 || !/^[\x21-\x7e]+$/.test(group))) {
    return { field: at('consumerGroup'), message: 'must be 1 to 255 visible ASCII characters' };
  }
  const policy = metadata.offsetResetPolicy;
  if (policy !== undefined && policy !== 'earliest' && policy !== 'latest') {
    return { field: at('offsetResetPolicy'), message: `must be earliest or latest, got '${policy}'` };
  }
  if (metadata.topic !== undefined && metadata.topic !== topic) {
    return { field: at('topic'), message: `'${metadata.topic}' differs from spec.topic '${topic}'` };
  }
  return undefined;
}

/** The settings of metadata that kafkaMetadataProblem() accepted. */
export function kafkaTriggerSettings(metadata: Record<string, string> | undefined): KafkaTriggerSettings {
  const servers = metadata?.bootstrapServers;
  const list = servers === undefined ? undefined : brokerList(servers);
  return {
    brokers: Array.isArray(list) ? list : undefined,
    group: metadata?.consumerGroup,
    // Flint's default, unlike KEDA's `latest`: a trigger created before its first message still gets that message.
    from: metadata?.offsetResetPolicy === 'latest' ? 'latest' : 'earliest',
  };
}

/**
 * Authentication from a secret's data, with KEDA's parameter names. A
 * string when the secret cannot be used, saying why.
 */
export function kafkaAuthFromSecret(data: Record<string, string>): KafkaAuth | string {
  const auth: KafkaAuth = {};
  const sasl = (data.sasl ?? 'none').trim().toLowerCase();
  if (sasl !== 'none') {
    const mechanism = SASL_MECHANISMS[sasl];
    if (mechanism === undefined) return `'sasl' must be none, plaintext, scram_sha256 or scram_sha512, got '${data.sasl}'`;
    if (!data.username || !data.password) return `'sasl' ${sasl} needs 'username' and 'password'`;
    auth.sasl = { mechanism, username: data.username, password: data.password };
  }
  const tls = tlsFromSecret(data);
  if (typeof tls === 'string') return tls;
  if (tls !== undefined) auth.tls = tls;
  return auth;
}
