// A TCP port nothing listens on yet, for a listener another process opens a
// moment later (nginx here; brokers, routers and control planes in tests).
//
// Not the kernel's pick for port 0: that comes from the ephemeral range
// (net.ipv4.ip_local_port_range), the same range every outgoing connection
// takes its local port from, so a connection made between the pick and the
// other process's bind can take the port first (EADDRINUSE; it happened in
// CI). Below that range only another listener can take it, and this process
// never hands out the same port twice.
import fs from 'node:fs';
import net from 'node:net';

const RANGE_FILE = '/proc/sys/net/ipv4/ip_local_port_range';
/** Well clear of the ports services conventionally use. */
const LOWEST = 10_000;
const ATTEMPTS = 200;
const handedOut = new Set<number>();

/** The ports outside the ephemeral range, as [first, last]; undefined when there are too few to pick from. */
export function portsOutsideEphemeral(rangeText: string | undefined): [number, number] | undefined {
  const m = /^\s*(\d+)\s+(\d+)\s*$/.exec(rangeText ?? '');
  const [low, high] = m ? [Number(m[1]), Number(m[2])] : [32_768, 60_999];
  if (low - LOWEST >= 1_000) return [LOWEST, low - 1];
  if (65_535 - high >= 1_000) return [high + 1, 65_535];
  return undefined;
}

function readRange(): string | undefined {
  try {
    return fs.readFileSync(RANGE_FILE, 'utf8');
  } catch {
    return undefined;
  }
}

function tryListen(port: number, host: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE' || err.code === 'EACCES') resolve(undefined);
      else reject(err);
    });
    s.listen({ port, host, exclusive: true }, () => {
      const bound = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(bound));
    });
  });
}

/**
 * A port free on `host` now, outside the ephemeral range when the machine leaves room for that. `random` picks the
 * candidates (a test's own sequence, rather than a mocked Math.random that anything else running may draw from).
 */
export async function freePort(host = '127.0.0.1', random: () => number = Math.random): Promise<number> {
  const span = portsOutsideEphemeral(readRange());
  if (span !== undefined) {
    const [first, last] = span;
    for (let i = 0; i < ATTEMPTS; i++) {
      const port = first + Math.floor(random() * (last - first + 1));
      if (handedOut.has(port)) continue;
      if ((await tryListen(port, host)) !== undefined) {
        handedOut.add(port);
        return port;
      }
    }
  }
  // Nothing found outside: the kernel's pick, with the race described above.
  const port = await tryListen(0, host);
  if (port === undefined) throw new Error(`no free port on ${host}`);
  handedOut.add(port);
  return port;
}
