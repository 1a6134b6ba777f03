// Why a NATS server refused a TLS client, found with a handshake of our own.
// The server speaks plain text first (its INFO line), then the client
// upgrades. A TLS 1.3 server that wants a client certificate it was not
// given says so only after the handshake, and nats.js, which is by then
// waiting for the server's answer to its CONNECT, reports a bare "timeout".
// Redoing the handshake by hand surfaces the server's alert instead.
import net from 'node:net';
import type { TlsMaterial } from '../api/tls-secret.ts';
import { probeTls } from './tls-probe.ts';

const PROBE_TIMEOUT_MS = 5_000;
const DEFAULT_PORT = 4222;

interface ServerInfo {
  tls_required?: boolean;
  tls_available?: boolean;
}

function hostPort(server: string): { host: string; port: number } {
  const u = new URL(/^[a-z]+:\/\//i.test(server) ? server : `nats://${server}`);
  return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port === '' ? DEFAULT_PORT : Number(u.port) };
}

/** A plain connection to the server and the INFO it greeted it with; undefined when none came in time. */
function greeting(host: string, port: number): Promise<{ socket: net.Socket; info: ServerInfo } | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    let head = '';
    const settle = (info: ServerInfo | undefined) => {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => {});
      if (info === undefined) socket.destroy();
      resolve(info === undefined ? undefined : { socket, info });
    };
    const timer = setTimeout(() => settle(undefined), PROBE_TIMEOUT_MS);
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n');
      if (end < 0) return;
      try {
        settle(JSON.parse(head.slice(0, end).replace(/^INFO\s+/, '')) as ServerInfo);
      } catch {
        settle(undefined);
      }
    });
    socket.once('error', () => settle(undefined));
  });
}

/** The TLS error the server at `server` answers a client with `material` with; undefined when it takes the client, or offers no TLS. */
export async function natsTlsRefusal(server: string, material: TlsMaterial | undefined): Promise<Error | undefined> {
  const { host, port } = hostPort(server);
  const plain = await greeting(host, port);
  if (plain === undefined) return undefined;
  if (!plain.info.tls_required && !plain.info.tls_available) {
    plain.socket.destroy();
    return undefined;
  }
  const outcome = await probeTls({ host, port, socket: plain.socket }, material, 'PING\r\n', PROBE_TIMEOUT_MS);
  return outcome instanceof Error ? outcome : undefined;
}
