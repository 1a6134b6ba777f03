// Slows down password guessing at the login endpoint, per client address.
//
// Policy (docs/authentication.md repeats it for users):
// - the first `freeFailures` (5) failed logins from an address cost nothing;
// - each further failure locks the address for baseDelay * 2^(n-1): 1 s, 2 s,
//   4 s ... capped at `maxDelay` (60 s). While locked, logins from it are
//   answered 429 with Retry-After and the password is not even looked at;
// - the count drops by one every `decay` (60 s), so a steady guesser gets
//   about one try per minute; a successful login forgets them all;
// - at most `maxAddresses` addresses are tracked; beyond that the one quiet
//   the longest is dropped, so memory stays bounded under a spray of sources.
// IPv6 clients are counted per /64, since one host commonly holds a whole /64.
import net from 'node:net';

export interface LoginThrottleOptions {
  freeFailures?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  decayMs?: number;
  maxAddresses?: number;
  /** Clock, for tests. */
  now?: () => number;
}

export interface LoginThrottle {
  /** Seconds the address must still wait, or 0 when it may try now. */
  retryAfter(address: string): number;
  /** Records a failure; returns the seconds the address is now locked for (0: not locked). */
  fail(address: string): number;
  succeed(address: string): void;
  /** Failures currently counted against the address (after decay). */
  failures(address: string): number;
  readonly size: number;
}

interface Entry {
  count: number;
  /** Time the decay is counted from. */
  since: number;
  lockedUntil: number;
}

function expandIPv6(addr: string): string[] {
  const [head, tail] = addr.includes('::') ? addr.split('::') : [addr, undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array(Math.max(0, 8 - left.length - right.length)).fill('0');
  return [...left, ...fill, ...right];
}

/** The key an address is counted under: IPv4 as is (also when IPv4-mapped), IPv6 by its /64. */
export function throttleKey(address: string | undefined): string {
  if (!address) return 'unknown';
  let a = address;
  const zone = a.indexOf('%');
  if (zone >= 0) a = a.slice(0, zone);
  if (a.toLowerCase().startsWith('::ffff:') && net.isIPv4(a.slice(7))) return a.slice(7);
  if (!net.isIPv6(a)) return a;
  return `${expandIPv6(a.toLowerCase())
    .slice(0, 4)
    .map((h) => h.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

export function createLoginThrottle(opts: LoginThrottleOptions = {}): LoginThrottle {
  const free = opts.freeFailures ?? 5;
  const base = opts.baseDelayMs ?? 1000;
  const max = opts.maxDelayMs ?? 60_000;
  const decay = opts.decayMs ?? 60_000;
  const maxAddresses = opts.maxAddresses ?? 10_000;
  const now = opts.now ?? Date.now;
  const entries = new Map<string, Entry>();

  /** The entry after decay, or undefined once everything is forgiven. */
  const current = (key: string, t: number): Entry | undefined => {
    const e = entries.get(key);
    if (!e) return undefined;
    const forgiven = Math.floor((t - e.since) / decay);
    if (forgiven > 0) {
      e.count -= forgiven;
      e.since += forgiven * decay;
    }
    if (e.count <= 0 && t >= e.lockedUntil) {
      entries.delete(key);
      return undefined;
    }
    return e;
  };

  return {
    retryAfter(address) {
      const t = now();
      const e = current(throttleKey(address), t);
      return e && t < e.lockedUntil ? Math.ceil((e.lockedUntil - t) / 1000) : 0;
    },
    fail(address) {
      const key = throttleKey(address);
      const t = now();
      const e = current(key, t) ?? { count: 0, since: t, lockedUntil: 0 };
      if (e.count <= 0) e.since = t;
      e.count++;
      let lockSeconds = 0;
      if (e.count > free) {
        const delay = Math.min(max, base * 2 ** Math.min(e.count - free - 1, 30));
        e.lockedUntil = t + delay;
        lockSeconds = Math.ceil(delay / 1000);
      }
      // Re-insert so the map's first key is the address quiet the longest.
      entries.delete(key);
      entries.set(key, e);
      if (entries.size > maxAddresses) entries.delete(entries.keys().next().value as string);
      return lockSeconds;
    },
    succeed(address) {
      entries.delete(throttleKey(address));
    },
    failures(address) {
      return current(throttleKey(address), now())?.count ?? 0;
    },
    get size() {
      return entries.size;
    },
  };
}
