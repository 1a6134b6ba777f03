// A listener as a group of sockets bound to one port with SO_REUSEPORT.
//
// libuv (since 1.45) accepts one connection each time the loop reports a
// listening socket ready, and under load a report comes once per pass over
// every connection with data waiting: while the process is busy, a burst of
// new clients waits in the kernel's accept queue for seconds (in a 5 s run
// of wrk opening 2,000 connections against a busy node:http server, about
// 1,000 were never accepted). The kernel spreads new connections over the
// sockets of a group, and each adds an accept per pass.
//
// Only sockets of the same effective user can join a group, so a function
// (another user, another network namespace) cannot take a share of the
// connections. A second server of this user on the same port would join it
// quietly, though, where a single socket fails with EADDRINUSE: the port is
// first taken by a plain socket alone, which fails as a single socket would.
import net from 'node:net';

export interface ListenGroupOptions {
  port: number;
  host: string;
  /** Accept queue of each socket (the kernel caps it at net.core.somaxconn). */
  backlog: number;
  /** Sockets in the group; 1 (or a platform without SO_REUSEPORT groups) is one plain socket. */
  sockets: number;
}

export interface ListenerGroup {
  readonly address: net.AddressInfo;
  /** The sockets after the first, which the caller closes with it. */
  readonly more: readonly net.Server[];
}

/**
 * Listens `first` on the port, then `sockets - 1` more servers in its group,
 * each handing the connections it accepts to `take` (for an http.Server:
 * `(s) => server.emit('connection', s)`, the way node:http is fed a socket).
 */
export async function listenGroup(first: net.Server, o: ListenGroupOptions, take: (socket: net.Socket) => void): Promise<ListenerGroup> {
  const count = process.platform === 'linux' ? Math.max(1, o.sockets) : 1;
  const reusePort = count > 1;
  if (reusePort && o.port !== 0) {
    const probe = net.createServer();
    await listenOne(probe, { ...o, reusePort: false });
    await new Promise((resolve) => probe.close(resolve));
  }
  const address = await listenOne(first, { ...o, reusePort });
  const more: net.Server[] = [];
  try {
    for (let i = 1; i < count; i++) {
      const server = net.createServer({ noDelay: true, allowHalfOpen: false }, take);
      await listenOne(server, { ...o, port: address.port, reusePort });
      more.push(server);
    }
  } catch (err) {
    for (const s of [first, ...more]) s.close();
    throw err;
  }
  return { address, more };
}

/**
 * A node:http(s) server on a group: the connections the other sockets accept
 * are handed to it the way node:http is fed a socket (its 'connection' event).
 */
export function listenServerGroup(server: net.Server, o: ListenGroupOptions): Promise<ListenerGroup> {
  return listenGroup(server, o, (socket) => server.emit('connection', socket));
}

function listenOne(server: net.Server, o: { port: number; host: string; backlog: number; reusePort: boolean }): Promise<net.AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: o.port, host: o.host, backlog: o.backlog, reusePort: o.reusePort }, () => {
      server.off('error', reject);
      resolve(server.address() as net.AddressInfo);
    });
  });
}

/** Closes every socket of a group; settles when each has closed (a net.Server's close waits for the connections it accepted). */
export function closeGroup(servers: readonly net.Server[]): Promise<void> {
  return Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(() => undefined);
}
