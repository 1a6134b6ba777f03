// Which resolv.conf a function with external network sees. Its namespace
// has a loopback of its own and cannot reach the host's, so a resolver the
// host runs on loopback (systemd-resolved's stub at 127.0.0.53, a local
// dnsmasq) answers nobody in there. systemd-resolved keeps the servers it
// forwards to in /run/systemd/resolve/resolv.conf; that file is used then.
// A resolver on one of the host's own addresses is closed to functions like
// every other host service.
import fs from 'node:fs';
import os from 'node:os';

export const HOST_RESOLV_CONF = '/etc/resolv.conf';
export const SYSTEMD_UPSTREAM_RESOLV_CONF = '/run/systemd/resolve/resolv.conf';

export function nameservers(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    if (m) out.push(m[1].replace(/%.*$/, ''));
  }
  return out;
}

const isLoopback = (ip: string) => ip.startsWith('127.') || ip === '::1';

export interface ResolvChoice {
  /** Host file bound at /etc/resolv.conf inside the sandbox. */
  file: string;
  /** Why lookups will fail in functions, when they will. */
  warning?: string;
}

export function chooseResolvConf(read: (file: string) => string | undefined = readOrUndefined, hostAddresses: Set<string> = ownAddresses()): ResolvChoice {
  const main = read(HOST_RESOLV_CONF);
  if (main === undefined) return { file: HOST_RESOLV_CONF, warning: `${HOST_RESOLV_CONF} cannot be read: functions with external network will have no DNS` };
  const servers = nameservers(main);
  const usable = (list: string[]) => list.filter((s) => !isLoopback(s) && !hostAddresses.has(s));
  if (servers.length > 0 && usable(servers).length === 0 && servers.every(isLoopback)) {
    const upstream = read(SYSTEMD_UPSTREAM_RESOLV_CONF);
    if (upstream !== undefined && usable(nameservers(upstream)).length > 0) return { file: SYSTEMD_UPSTREAM_RESOLV_CONF };
  }
  if (servers.length === 0) return { file: HOST_RESOLV_CONF, warning: `${HOST_RESOLV_CONF} names no nameserver: functions with external network will have no DNS` };
  if (usable(servers).length === 0) {
    return {
      file: HOST_RESOLV_CONF,
      warning: `every nameserver in ${HOST_RESOLV_CONF} (${servers.join(', ')}) is on the host itself, which functions with external network cannot reach: they will have no DNS (point the host at a resolver on the network)`,
    };
  }
  return { file: HOST_RESOLV_CONF };
}

function readOrUndefined(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

function ownAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) out.add(a.address);
  return out;
}
