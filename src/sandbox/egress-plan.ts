// What an egress network namespace is made of, as data: the addresses of
// one instance's point-to-point link, the names that mark everything as
// Flint's (so a later start can sweep what a crashed server left), and the
// nftables table that keeps functions away from the host. egress.ts runs it.
//
// Why a veth pair per instance and not pasta or slirp4netns: those two
// connect out from sockets of the host, so a function behind them reaches
// every service of the host bound to 0.0.0.0 or to a host address, and
// filtering that means matching the helper's own sockets; they also add a
// process per instance. Measured on the 2-core machine this was written on
// (bench/egress.ts, bench/RESULTS.md): two `ip` runs make a namespace with
// its veth pair in about 15 ms at p50 and `ip netns delete` takes 3-6 ms,
// and a worker with one starts as fast as one without, within the noise
// (bwrap then skips making its own namespace); `pasta --config-net -- true`
// (Debian bookworm's passt 2023-03-09) never returned there, spinning a
// core. A veth pair puts every packet of the function through the host's
// own netfilter hooks, where one static table decides.
import { FlintError } from '../api/errors.ts';

/** Host-side interface names of function veths start with this; nft matches on it. */
export const VETH_PREFIX = 'flv';
/** Network namespaces (under /run/netns) are named flint-<owner pid>-<n>. */
export const NETNS_PREFIX = 'flint-';
/** nftables tables (family inet) are named flint_<owner pid>. */
export const TABLE_PREFIX = 'flint_';
/** The interface name inside the namespace. */
export const INNER_IFACE = 'eth0';

export interface EgressSubnet {
  /** The network address as a 32-bit number. */
  base: number;
  prefix: number;
  /** How many /30 links fit. */
  slots: number;
  text: string;
}

export function ipv4ToNumber(ip: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return undefined;
  return ((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]) >>> 0;
}

export function numberToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/**
 * Parses the install value executor.egressSubnet. Between /12 and /24: one
 * /30 per running networked instance or build, so a /24 holds 64.
 */
export function parseSubnet(text: string): EgressSubnet {
  const m = /^([0-9.]+)\/(\d{1,2})$/.exec(text);
  const addr = m ? ipv4ToNumber(m[1]) : undefined;
  const prefix = m ? Number(m[2]) : Number.NaN;
  if (addr === undefined || !(prefix >= 12 && prefix <= 24)) {
    throw new FlintError('FLINT_ERR_CONFIG', `install value 'executor.egressSubnet' must be an IPv4 network from /12 to /24 (e.g. 10.231.0.0/16), got ${JSON.stringify(text)}`, { field: 'executor.egressSubnet' });
  }
  const mask = (0xffffffff << (32 - prefix)) >>> 0;
  const base = (addr & mask) >>> 0;
  if (base !== addr) {
    throw new FlintError('FLINT_ERR_CONFIG', `install value 'executor.egressSubnet' has host bits set: ${text} (the network is ${numberToIpv4(base)}/${prefix})`, { field: 'executor.egressSubnet' });
  }
  return { base, prefix, slots: 2 ** (30 - prefix), text };
}

export interface EgressLink {
  slot: number;
  /** Host side: the function's gateway. */
  hostAddress: string;
  /** Inside the namespace. */
  innerAddress: string;
  veth: string;
}

export function linkFor(subnet: EgressSubnet, slot: number): EgressLink {
  if (!Number.isInteger(slot) || slot < 0 || slot >= subnet.slots) throw new RangeError(`slot ${slot} is outside ${subnet.text}`);
  const net = subnet.base + slot * 4;
  return { slot, hostAddress: numberToIpv4(net + 1), innerAddress: numberToIpv4(net + 2), veth: `${VETH_PREFIX}${slot}` };
}

export function netnsName(ownerPid: number, n: number): string {
  return `${NETNS_PREFIX}${ownerPid}-${n}`;
}

/** The owner pid of a namespace or table Flint named, or undefined for anything else. */
export function ownerOf(name: string): number | undefined {
  const m = new RegExp(`^(?:${NETNS_PREFIX}(\\d+)-\\d+|${TABLE_PREFIX}(\\d+))$`).exec(name);
  return m ? Number(m[1] ?? m[2]) : undefined;
}

export function tableName(ownerPid: number): string {
  return `${TABLE_PREFIX}${ownerPid}`;
}

/** `ip -batch` lines run in the host's namespace: the veth pair, its inner end moved into `netns`. */
export function hostLinkCommands(link: EgressLink, netns: string): string[] {
  return [`link add ${link.veth} type veth peer name ${INNER_IFACE} netns ${netns}`, `addr add ${link.hostAddress}/30 dev ${link.veth}`, `link set ${link.veth} up`];
}

/** `ip -n <netns> -batch` lines: the inner end's address, loopback, and the default route through the host. */
export function innerLinkCommands(link: EgressLink): string[] {
  return [`addr add ${link.innerAddress}/30 dev ${INNER_IFACE}`, 'link set lo up', `link set ${INNER_IFACE} up`, `route add default via ${link.hostAddress}`];
}

/**
 * The table one server owns (`nft -f -` input). Its rules match every Flint
 * veth on the machine, not only this server's: two servers on one host then
 * each protect all functions, and one stopping (deleting its table) leaves
 * the other's functions as closed off as before.
 *
 * - input: nothing from a function reaches the host itself, whichever of the
 *   host's addresses it is sent to (control plane, router, ingress, brokers
 *   on 0.0.0.0, the gateway address of its own veth). inet covers IPv6 too
 *   (the veths' link-local addresses).
 * - forward: out to the world, but not to another function's namespace
 *   (each instance has its own) and not to link-local 169.254.0.0/16, where
 *   clouds serve instance metadata and credentials; IPv6 is not forwarded
 *   (the namespaces have no IPv6 address but link-local). Into a function,
 *   only the replies of its own connections.
 * - postrouting: the functions' private addresses are masqueraded to the
 *   host's address on the way out.
 *
 * Priorities run just before the usual filter chains; a drop here is final
 * whatever other tables say, while an accept here does not override another
 * table's drop (a host whose forward policy is drop, as Docker sets it, must
 * allow the flv* interfaces there too).
 */
export function nftRuleset(table: string, subnet: EgressSubnet): string {
  const veths = `"${VETH_PREFIX}*"`;
  return [
    `table inet ${table} {`,
    '  chain input {',
    '    type filter hook input priority -10; policy accept;',
    `    iifname ${veths} drop`,
    '  }',
    '  chain forward {',
    '    type filter hook forward priority -10; policy accept;',
    `    iifname ${veths} oifname ${veths} drop`,
    `    iifname ${veths} ip daddr 169.254.0.0/16 drop`,
    `    iifname ${veths} ip daddr ${subnet.text} drop`,
    `    iifname ${veths} meta nfproto ipv6 drop`,
    `    iifname ${veths} accept`,
    `    oifname ${veths} ct state established,related accept`,
    `    oifname ${veths} drop`,
    '  }',
    '  chain postrouting {',
    '    type nat hook postrouting priority 100; policy accept;',
    `    ip saddr ${subnet.text} oifname != ${veths} masquerade`,
    '  }',
    '}',
    '',
  ].join('\n');
}
