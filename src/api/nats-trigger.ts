// What a NATS JetStream trigger's metadata and secret say. Fission's
// nats-jetstream connector reads `natsServer` (its NATS_SERVER) for the
// server and `consumer` for the durable consumer; KEDA's scaler reads
// `natsServerMonitoringEndpoint`, `account`, `stream` and `consumer` to
// measure lag. Flint consumes from the stream that holds the topic's
// subject, whatever its name, so `stream` is checked but not needed.
import type { FieldProblem } from './kafka-trigger.ts';
import { type TlsMaterial, tlsFromSecret } from './tls-secret.ts';

/** Client credentials from the trigger's secret. */
export interface NatsAuth {
  user?: string;
  pass?: string;
  token?: string;
}

/** The trigger's own servers and consumer; undefined fields: the install's servers, Flint's consumer name. */
export interface NatsTriggerSettings {
  servers?: string[];
  auth?: NatsAuth;
  /** The secret's CA and client certificate, when its `tls` is enable. */
  tls?: TlsMaterial;
  group?: string;
}

const at = (key: string) => `spec.metadata.${key}`;
const HOST = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)(:(\d{1,5}))?$/;
// JetStream's rule for stream and consumer names: no whitespace, '.', '*', '>' or path separators.
const JS_NAME = /^[^\s.*>/\\]{1,255}$/;

function serverProblem(server: string): string | undefined {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(server);
  if (scheme !== null) {
    const shown = server.replace(/\/\/[^@/]*@/, '//***@');
    if (scheme[1] !== 'nats' && scheme[1] !== 'tls') {
      return `'${shown}' must be host:port or a nats:// or tls:// URL (the client port, not KEDA's natsServerMonitoringEndpoint)`;
    }
    try {
      new URL(server);
    } catch {
      return `'${shown}' is not a URL`;
    }
    return undefined;
  }
  const m = HOST.exec(server);
  if (m === null || (m[4] !== undefined && (Number(m[4]) < 1 || Number(m[4]) > 65535))) return `'${server}' is not host:port`;
  return undefined;
}

/** The servers a `natsServer` value names: a comma-separated list, as `nats.servers` is. */
function serverList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export function natsMetadataProblem(metadata: Record<string, string> | undefined): FieldProblem | undefined {
  if (metadata === undefined) return undefined;
  if (metadata.natsServer !== undefined) {
    const servers = serverList(metadata.natsServer);
    if (servers.length === 0) return { field: at('natsServer'), message: 'names no server' };
    for (const s of servers) {
      const p = serverProblem(s);
      if (p !== undefined) return { field: at('natsServer'), message: p };
    }
  }
  for (const key of ['consumer', 'stream']) {
    const v = metadata[key];
    if (v !== undefined && !JS_NAME.test(v)) {
      return { field: at(key), message: `'${v}' is not a JetStream name: 1 to 255 characters, without whitespace, '.', '*', '>', '/' or '\\'` };
    }
  }
  return undefined;
}

/** A NATS trigger's own durable consumer (metadata `consumer`); undefined: Flint's per-trigger default. */
export function natsConsumer(metadata: Record<string, string> | undefined): string | undefined {
  return metadata?.consumer;
}

/**
 * A NATS JetStream trigger's servers (metadata `natsServer`) with the
 * secret's `username` and `password`, or `token`, and its `ca`, `cert` and
 * `key` when its `tls` is enable. A string when the secret cannot be used,
 * saying why.
 */
export function natsSettings(metadata: Record<string, string> | undefined, secret: Record<string, string> | undefined): NatsTriggerSettings | string {
  const group = natsConsumer(metadata);
  let auth: NatsAuth | undefined;
  let tls: TlsMaterial | undefined;
  if (secret !== undefined) {
    const t = tlsFromSecret(secret);
    if (typeof t === 'string') return t;
    tls = t;
    const { username, password, token } = secret;
    if ((username === undefined) !== (password === undefined)) return "'username' and 'password' go together";
    if (token !== undefined && username !== undefined) return "either 'token' or 'username' and 'password', not both";
    if (token !== undefined) auth = { token };
    else if (username !== undefined) auth = { user: username, pass: password };
  }
  const named = metadata?.natsServer;
  if (named === undefined) return group === undefined ? {} : { group };
  const settings: NatsTriggerSettings = { servers: serverList(named) };
  if (auth !== undefined) settings.auth = auth;
  if (tls !== undefined) settings.tls = tls;
  if (group !== undefined) settings.group = group;
  return settings;
}
