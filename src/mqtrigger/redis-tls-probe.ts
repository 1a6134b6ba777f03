// A first TLS connection to a Redis server, made by hand before the client
// makes its own. @redis/client listens for its socket's errors only after
// the TLS handshake's promise has resolved. A TLS 1.3 server that refuses
// the client's certificate (or wants one it was not given) says so just
// after the handshake, and that error, emitted on the next tick, finds no
// listener and takes the whole process down. Here the same refusal is an
// ordinary error. (A server that starts refusing a certificate it accepted
// before, while the client reconnects, is not covered.)
import net from 'node:net';
import tls from 'node:tls';
import type { TlsMaterial } from '../api/tls-secret.ts';

const PROBE_TIMEOUT_MS = 10_000;

/** Resolves once the server at `url` (rediss://) has answered a PING over TLS, whatever the answer (NOAUTH is one). */
export function probeRedisTls(url: URL, material: TlsMaterial | undefined): Promise<void> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = url.port === '' ? 6379 : Number(url.port);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host, port, servername: net.isIP(host) === 0 ? host : undefined, ca: material?.ca, cert: material?.cert, key: material?.key });
    const done = (err?: Error) => {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.destroy();
      if (err === undefined) resolve();
      else reject(err);
    };
    const timer = setTimeout(() => done(new Error(`no answer over TLS from ${host}:${port} within ${PROBE_TIMEOUT_MS / 1000} s`)), PROBE_TIMEOUT_MS);
    socket.once('secureConnect', () => socket.write('PING\r\n'));
    socket.once('data', () => done());
    socket.once('error', (err) => done(err));
    socket.once('close', () => done(new Error(`${host}:${port} closed the TLS connection before answering`)));
  });
}
