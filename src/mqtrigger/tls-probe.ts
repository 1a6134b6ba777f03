// A TLS handshake made by hand, to learn how a server answers a client
// before a broker library makes its own connection: some libraries report
// a server's refusal badly (a bare timeout), or do not survive it.
import net from 'node:net';
import tls from 'node:tls';
import type { TlsMaterial } from '../api/tls-secret.ts';

/** The server answered the greeting, said nothing in time, or refused the client (the error says how). */
export type TlsProbeOutcome = 'answered' | 'silent' | Error;

export interface TlsProbeTarget {
  host: string;
  port: number;
  /** A connection already open to host:port, to upgrade (protocols that speak plain text first). */
  socket?: net.Socket;
}

/** Handshakes with `material`, sends `greeting` and waits up to `timeoutMs` for any answer. */
export function probeTls(target: TlsProbeTarget, material: TlsMaterial | undefined, greeting: string, timeoutMs: number): Promise<TlsProbeOutcome> {
  const { host, port } = target;
  return new Promise((resolve) => {
    const socket = tls.connect({
      host,
      port,
      socket: target.socket,
      servername: net.isIP(host) === 0 ? host : undefined,
      ca: material?.ca,
      cert: material?.cert,
      key: material?.key,
    });
    const done = (outcome: TlsProbeOutcome) => {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => done('silent'), timeoutMs);
    socket.once('secureConnect', () => socket.write(greeting));
    socket.once('data', () => done('answered'));
    socket.once('error', (err) => done(err));
    socket.once('close', () => done(new Error(`${host}:${port} closed the TLS connection before answering`)));
  });
}
