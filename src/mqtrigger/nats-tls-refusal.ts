// Why a NATS server refused a TLS client, found with a handshake of our own.
// The server speaks plain text first (its INFO line), then the client
// upgrades. A TLS 1.3 server that wants a client certificate it was not
// given says so only after the handshake, and nats.js, which is by then
// waiting for the server's answer to its CONNECT, reports a bare "timeout".
// Redoing the handshake by hand surfaces the server's alert instead.
import net from 'node:net';
import tls from 'node:tls';
import type { TlsMaterial } from '../api/tls-secret.ts';

const PROBE_TIMEOUT_MS = 5_000;
const DEFAULT_PORT = 4222;

function hostPort(server: string): { host: string; port: number } {
  const u = new URL(/^[a-z]+:\/\//i.test(server) ? server : `nats://${server}`);
  return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port === '' ? DEFAULT_PORT : Number(u.port) };
}

/** The TLS error the server at `server` answers a client with `material` with; undefined when it takes the client, or offers no TLS. */
export function natsTlsRefusal(server: string, material: TlsMaterial | undefined): Promise<Error | undefined> {
  const { host, port } = hostPort(server);
  return new Promise((resolve) => {
    let socket: net.Socket = net.connect(port, host);
    const done = (err: Error | undefined) => {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.destroy();
      resolve(err);
    };
    const timer = setTimeout(() => done(undefined), PROBE_TIMEOUT_MS);
    let head = '';
    const onInfo = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n');
      if (end < 0) return;
      socket.off('data', onInfo);
      let info: { tls_required?: boolean; tls_available?: boolean };
      try {
        info = JSON.parse(head.slice(0, end).replace(/^INFO\s+/, ''));
      } catch {
        return done(undefined);
      }
      if (!info.tls_required && !info.tls_available) return done(undefined);
      const plain = socket;
      plain.removeAllListeners();
      plain.on('error', () => {});
      socket = tls.connect({ socket: plain, servername: net.isIP(host) === 0 ? host : undefined, ca: material?.ca, cert: material?.cert, key: material?.key });
      socket.once('secureConnect', () => socket.write('PING\r\n'));
      socket.once('data', () => done(undefined));
      socket.once('error', (err) => done(err));
      socket.once('close', () => done(new Error(`${host}:${port} closed the TLS connection`)));
    };
    socket.on('data', onInfo);
    socket.once('error', () => done(undefined));
  });
}
