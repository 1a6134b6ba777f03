// A first TLS connection to a Redis server, made by hand before the client
// makes its own. @redis/client listens for its socket's errors only after
// the TLS handshake's promise has resolved. A TLS 1.3 server that refuses
// the client's certificate (or wants one it was not given) says so just
// after the handshake, and that error, emitted on the next tick, finds no
// listener and takes the whole process down. Here the same refusal is an
// ordinary error. (A server that starts refusing a certificate it accepted
// before, while the client reconnects, is not covered.)
import type { TlsMaterial } from '../api/tls-secret.ts';
import { probeTls } from './tls-probe.ts';

const PROBE_TIMEOUT_MS = 10_000;

/** Resolves once the server at `url` (rediss://) has answered a PING over TLS, whatever the answer (NOAUTH is one). */
export async function probeRedisTls(url: URL, material: TlsMaterial | undefined): Promise<void> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = url.port === '' ? 6379 : Number(url.port);
  const outcome = await probeTls({ host, port }, material, 'PING\r\n', PROBE_TIMEOUT_MS);
  if (outcome === 'silent') throw new Error(`no answer over TLS from ${host}:${port} within ${PROBE_TIMEOUT_MS / 1000} s`);
  if (outcome instanceof Error) throw outcome;
}
