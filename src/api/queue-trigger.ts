// What a RabbitMQ or Redis Streams trigger's KEDA metadata and secret say,
// with the names KEDA's scalers use, so a trigger written for Fission's
// KEDA connectors consumes from the server it names. (Kafka's are in
// kafka-trigger.ts.) Keys not read here are KEDA's scaling settings.
import type { FieldProblem } from './kafka-trigger.ts';
import { type TlsMaterial, tlsFromSecret } from './tls-secret.ts';

/** Where a trigger's own server is, and the group it consumes in; undefined fields: the install's. */
export interface QueueTriggerSettings {
  url?: string;
  group?: string;
  /** The secret's CA and client certificate for the trigger's own server (`url`). */
  tls?: TlsMaterial;
}

const at = (key: string) => `spec.metadata.${key}`;
const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?):(\d{1,5})$/;

function validPort(hostPort: string): boolean {
  const m = HOST_PORT.exec(hostPort);
  return m !== null && Number(m[3]) >= 1 && Number(m[3]) <= 65535;
}

function amqpUrlProblem(value: string): string | undefined {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    // Whatever stands before the last '@' may be credentials.
    return `'${value.replace(/^(.*\/\/)?.*@/, '$1***@')}' is not a URL`;
  }
  // KEDA may watch a queue over the management API (http); the connector itself consumes over AMQP.
  if (u.protocol !== 'amqp:' && u.protocol !== 'amqps:') return `must be an amqp:// or amqps:// URL, got ${u.protocol}//...`;
  return undefined;
}

function sameAs(metadata: Record<string, string>, key: string, topic: string): FieldProblem | undefined {
  const v = metadata[key];
  return v !== undefined && v !== topic ? { field: at(key), message: `'${v}' differs from spec.topic '${topic}'` } : undefined;
}

export function rabbitMetadataProblem(metadata: Record<string, string> | undefined, topic: string): FieldProblem | undefined {
  if (metadata === undefined) return undefined;
  if (metadata.host !== undefined) {
    const p = amqpUrlProblem(metadata.host);
    if (p !== undefined) return { field: at('host'), message: p };
  }
  if (metadata.vhostName === '') return { field: at('vhostName'), message: 'must not be empty' };
  return sameAs(metadata, 'queueName', topic);
}

export function redisMetadataProblem(metadata: Record<string, string> | undefined, topic: string): FieldProblem | undefined {
  if (metadata === undefined) return undefined;
  if (metadata.address !== undefined && !validPort(metadata.address)) return { field: at('address'), message: `'${metadata.address}' is not host:port` };
  if (metadata.host !== undefined && metadata.address === undefined && !validPort(`${metadata.host}:${metadata.port ?? '6379'}`)) {
    return { field: at('host'), message: `'${metadata.host}:${metadata.port ?? '6379'}' is not host:port` };
  }
  const db = metadata.databaseIndex;
  if (db !== undefined && !/^\d{1,4}$/.test(db)) return { field: at('databaseIndex'), message: `must be a whole number, got '${db}'` };
  const tls = metadata.enableTLS;
  if (tls !== undefined && tls !== 'true' && tls !== 'false') return { field: at('enableTLS'), message: `must be true or false, got '${tls}'` };
  const group = metadata.consumerGroup;
  if (group !== undefined && (group === '' || group.length > 255 || !/^[\x21-\x7e]+$/.test(group))) {
    return { field: at('consumerGroup'), message: 'must be 1 to 255 visible ASCII characters' };
  }
  return sameAs(metadata, 'stream', topic);
}

/** A Redis Streams trigger's own consumer group (metadata `consumerGroup`); undefined: Flint's per-trigger default. */
export function redisGroup(metadata: Record<string, string> | undefined): string | undefined {
  return metadata?.consumerGroup;
}

/** The secret's TLS material, or why it cannot be used; undefined without a secret or when it leaves TLS off. */
function secretTls(secret: Record<string, string> | undefined): TlsMaterial | undefined | string {
  return secret === undefined ? undefined : tlsFromSecret(secret);
}

/**
 * A RabbitMQ trigger's server: the secret's `host` (as KEDA's
 * TriggerAuthentication may give it), else the metadata's, with the
 * secret's `username` and `password` and the metadata's `vhostName` put in,
 * and its `ca`, `cert` and `key` when its `tls` is enable (which takes an
 * amqps:// host). A string when the secret cannot be used, saying why.
 */
export function rabbitSettings(metadata: Record<string, string> | undefined, secret: Record<string, string> | undefined): QueueTriggerSettings | string {
  const tls = secretTls(secret);
  if (typeof tls === 'string') return tls;
  const host = secret?.host ?? metadata?.host;
  if (host === undefined) return {};
  const problem = amqpUrlProblem(host);
  if (problem !== undefined) return `'host' ${problem}`;
  const u = new URL(host);
  if (tls !== undefined && u.protocol !== 'amqps:') return "'tls' enable needs an amqps:// host";
  if (secret?.username) u.username = encodeURIComponent(secret.username);
  if (secret?.password) u.password = encodeURIComponent(secret.password);
  if (metadata?.vhostName) u.pathname = `/${encodeURIComponent(metadata.vhostName)}`;
  return tls === undefined ? { url: u.toString() } : { url: u.toString(), tls };
}

/**
 * A Redis Streams trigger's server and group, with the secret's `username`
 * and `password`. TLS when the metadata's `enableTLS` is true or the
 * secret's `tls` is enable, with the secret's `ca`, `cert` and `key` then
 * (either switch will do for them, as with KEDA's redis-streams scaler).
 * A string when the secret cannot be used, saying why.
 */
export function redisSettings(metadata: Record<string, string> | undefined, secret: Record<string, string> | undefined): QueueTriggerSettings | string {
  const tls = metadata?.enableTLS === 'true' && secret !== undefined && secret.tls === undefined ? secretTls({ ...secret, tls: 'enable' }) : secretTls(secret);
  if (typeof tls === 'string') return tls;
  const group = redisGroup(metadata);
  const address = metadata?.address ?? (metadata?.host === undefined ? undefined : `${metadata.host}:${metadata.port ?? '6379'}`);
  if (address === undefined) return { group };
  const u = new URL(`${tls !== undefined || metadata?.enableTLS === 'true' ? 'rediss' : 'redis'}://${address}`);
  if (secret?.username) u.username = encodeURIComponent(secret.username);
  if (secret?.password) u.password = encodeURIComponent(secret.password);
  if (metadata?.databaseIndex) u.pathname = `/${Number(metadata.databaseIndex)}`;
  return tls === undefined ? { url: u.toString(), group } : { url: u.toString(), group, tls };
}
