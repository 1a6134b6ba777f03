// TLS material from a message-queue trigger's secret, under the parameter
// names KEDA's Kafka, RabbitMQ and Redis Streams scalers share: `tls`
// (enable or disable) and the PEM texts `ca`, `cert` and `key`.

/** PEM texts; a missing `ca` means the system's CAs. */
export interface TlsMaterial {
  ca?: string;
  cert?: string;
  key?: string;
}

/**
 * What the secret asks for: undefined when it does not turn TLS on, a string
 * when it cannot be used, saying why.
 */
export function tlsFromSecret(data: Record<string, string>): TlsMaterial | undefined | string {
  const tls = (data.tls ?? 'disable').trim().toLowerCase();
  if (tls !== 'enable' && tls !== 'disable') return `'tls' must be enable or disable, got '${data.tls}'`;
  if (tls === 'disable') return undefined;
  if ((data.cert === undefined) !== (data.key === undefined)) return "'cert' and 'key' go together";
  const material: TlsMaterial = {};
  if (data.ca !== undefined) material.ca = data.ca;
  if (data.cert !== undefined) material.cert = data.cert;
  if (data.key !== undefined) material.key = data.key;
  return material;
}
