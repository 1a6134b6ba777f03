// Egress network namespaces: a sandbox whose environment allows external
// network (or a build) gets a network namespace of its own, joined to the
// host by a veth pair, routed and masqueraded out to the world, and cut off
// from the host and from every other sandbox by one nftables table this
// server owns (egress-plan.ts says what and why). Never the host's network:
// when this machine cannot make such namespaces (not root, no
// CAP_NET_ADMIN, ip/nft/nsenter missing) create() refuses with the reason.
//
//   const egress = new EgressNetworks({ subnet: '10.231.0.0/16', logger });
//   await egress.start();                // sweeps what dead servers left; warns when unusable
//   const ns = await egress.create();    // run the sandbox under `nsenter --net=${ns.path}`
//   ...; await ns.release();             // once the sandbox's processes are gone
//   await egress.stop();                 // every namespace left, and the table
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { FlintError } from '../api/errors.ts';
import { type EgressLink, type EgressSubnet, hostLinkCommands, innerLinkCommands, linkFor, NETNS_PREFIX, netnsName, nftRuleset, ownerOf, parseSubnet, TABLE_PREFIX, tableName } from './egress-plan.ts';
import { chooseResolvConf } from './resolv.ts';

const NETNS_DIR = '/run/netns';
const IP_FORWARD = '/proc/sys/net/ipv4/ip_forward';
// Capability bits in /proc/self/status CapEff.
const CAP_NET_ADMIN = 12n;
const CAP_SYS_ADMIN = 21n;

export interface EgressNamespace {
  /** The namespace's file: `nsenter --net=<path>` runs a command inside. */
  readonly path: string;
  readonly name: string;
  /** The sandbox's own address. */
  readonly address: string;
  /** Host file to show at /etc/resolv.conf inside. */
  readonly resolvConf: string;
  /** Deletes the namespace (its veth pair goes with it); safe to call twice. */
  release(): Promise<void>;
}

/** What a sandbox needs of the manager. */
export interface EgressProvider {
  create(): Promise<EgressNamespace>;
}

interface Log {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface EgressOptions {
  /** executor.egressSubnet: the private network the sandboxes' links are cut from. */
  subnet: string;
  logger?: Log;
  /** Owner of the names (default this process's pid); tests use another to stand for a dead server. */
  ownerPid?: number;
}

function findTool(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/usr/bin', '/sbin', '/bin'])) {
    if (!dir) continue;
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {}
  }
  return undefined;
}

export const NSENTER = findTool('nsenter') ?? '/usr/bin/nsenter';

function run(cmd: string, args: string[], input?: string): Promise<{ ok: boolean; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: 10_000 }, (err, stdout, stderr) => {
      resolve({ ok: !err, out: `${stdout}${stderr}`.trim() || (err ? err.message : '') });
    });
    child.stdin?.on('error', () => {});
    child.stdin?.end(input ?? '');
  });
}

function effectiveCaps(): bigint {
  try {
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    return m ? BigInt(`0x${m[1]}`) : 0n;
  } catch {
    return 0n;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Why egress namespaces cannot be made on this machine, or undefined when they can. */
export function egressUnavailableReason(caps = effectiveCaps(), tool = findTool): string | undefined {
  const missing = ['ip', 'nft', 'nsenter'].filter((t) => !tool(t));
  if (missing.length) return `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not installed (Debian: apt-get install iproute2 nftables util-linux)`;
  const need = [];
  if (!(caps & (1n << CAP_NET_ADMIN))) need.push('CAP_NET_ADMIN');
  if (!(caps & (1n << CAP_SYS_ADMIN))) need.push('CAP_SYS_ADMIN');
  if (need.length) return `the server lacks ${need.join(' and ')} (run it as root)`;
  return undefined;
}

export class EgressNetworks implements EgressProvider {
  readonly #subnet: EgressSubnet;
  readonly #log: Log | undefined;
  readonly #owner: number;
  readonly #ip: string;
  readonly #nft: string;
  readonly #live = new Map<string, EgressLink>();
  readonly #slots = new Set<number>();
  #unavailable: string | undefined;
  #ready: Promise<void> | undefined;
  #tableMade = false;
  #counter = 0;
  #resolv = chooseResolvConf();
  #stopped = false;

  constructor(opts: EgressOptions) {
    this.#subnet = parseSubnet(opts.subnet);
    this.#log = opts.logger;
    this.#owner = opts.ownerPid ?? process.pid;
    this.#ip = findTool('ip') ?? 'ip';
    this.#nft = findTool('nft') ?? 'nft';
    this.#unavailable = egressUnavailableReason();
  }

  /** Why create() refuses, or undefined. */
  get unavailable(): string | undefined {
    return this.#unavailable;
  }

  /**
   * Sweeps namespaces and tables of servers that are gone; says once why
   * sandboxes cannot have external network here. `functions`: whether
   * functions run in these sandboxes (local mode) or only builds do.
   */
  async start(opts: { functions: boolean } = { functions: true }): Promise<void> {
    if (this.#unavailable) {
      const what = opts.functions ? 'functions of environments with external network (allowAccessToExternalNetwork) fail to start, and builds run without network' : 'builds run without network';
      this.#log?.warn({ reason: this.#unavailable }, `sandboxes cannot get a network of their own here, so ${what}: ${this.#unavailable}`);
      return;
    }
    await this.sweep();
    if (this.#resolv.warning) this.#log?.warn({}, this.#resolv.warning);
  }

  /** Removes what servers no longer running (crashed, killed) left behind. */
  async sweep(): Promise<{ namespaces: string[]; tables: string[] }> {
    const stale = (name: string) => {
      const pid = ownerOf(name);
      return pid !== undefined && pid !== this.#owner && !alive(pid);
    };
    let entries: string[] = [];
    try {
      entries = fs.readdirSync(NETNS_DIR);
    } catch {}
    const namespaces = entries.filter((n) => n.startsWith(NETNS_PREFIX) && stale(n));
    for (const n of namespaces) await run(this.#ip, ['netns', 'delete', n]);
    const listed = await run(this.#nft, ['list', 'tables', 'inet']);
    const tables = [...listed.out.matchAll(/^table inet (\S+)$/gm)].map((m) => m[1]).filter((t) => t.startsWith(TABLE_PREFIX) && stale(t));
    for (const t of tables) await run(this.#nft, ['delete', 'table', 'inet', t]);
    if (namespaces.length || tables.length) this.#log?.info({ namespaces, tables }, 'removed network namespaces and nftables tables of Flint servers that are gone');
    return { namespaces, tables };
  }

  /** The table and IPv4 forwarding, made on first use: a server whose functions never ask for network changes nothing. */
  #prepare(): Promise<void> {
    this.#ready ??= (async () => {
      const table = tableName(this.#owner);
      // A table of the same name can only be a leftover of this pid's previous life.
      await run(this.#nft, ['delete', 'table', 'inet', table]);
      const made = await run(this.#nft, ['-f', '-'], nftRuleset(table, this.#subnet));
      if (!made.ok) throw new Error(`nft could not install the table ${table}: ${made.out}`);
      this.#tableMade = true;
      // A server that exits without stop() (an uncaught error) still takes its namespaces and table along.
      process.once('exit', () => this.stopSync());
      if (fs.readFileSync(IP_FORWARD, 'utf8').trim() !== '1') {
        fs.writeFileSync(IP_FORWARD, '1');
        this.#log?.info({}, 'turned on IPv4 forwarding (net.ipv4.ip_forward=1) for functions with external network; it stays on');
      }
    })();
    this.#ready.catch(() => {});
    return this.#ready;
  }

  #refuse(why: string): FlintError {
    return new FlintError('FLINT_ERR_NETWORK_UNAVAILABLE', `external network was asked for, but this server cannot give the sandbox a network of its own (it never shares the host's): ${why}`);
  }

  async create(): Promise<EgressNamespace> {
    if (this.#unavailable) throw this.#refuse(this.#unavailable);
    if (this.#stopped) throw this.#refuse('the server is stopping');
    try {
      await this.#prepare();
    } catch (err) {
      throw this.#refuse((err as Error).message);
    }
    const name = netnsName(this.#owner, this.#counter++);
    let link: EgressLink | undefined;
    try {
      link = await this.#claimLink(name);
      const inner = await run(this.#ip, ['-n', name, '-batch', '-'], `${innerLinkCommands(link).join('\n')}\n`);
      if (!inner.ok) throw this.#refuse(`configuring ${name}: ${inner.out}`);
      // The host end needs no IPv6: without it the function cannot even try the host's link-local address.
      try {
        fs.writeFileSync(`/proc/sys/net/ipv6/conf/${link.veth}/disable_ipv6`, '1');
      } catch {}
    } catch (err) {
      if (link) this.#slots.delete(link.slot);
      await run(this.#ip, ['netns', 'delete', name]);
      throw err;
    }
    this.#live.set(name, link);
    const claimed = link;
    let released: Promise<void> | undefined;
    return {
      name,
      path: path.join(NETNS_DIR, name),
      address: claimed.innerAddress,
      resolvConf: this.#resolv.file,
      release: () => {
        released ??= this.#release(name, claimed);
        return released;
      },
    };
  }

  /**
   * The namespace, and a free /30 of the subnet with its veth pair. The
   * veth's name is the lock between servers on one host: a slot another
   * server holds fails with "File exists" and the next one is tried. The
   * first try makes the namespace in the same `ip` run (each run costs
   * milliseconds of a worker's start).
   */
  async #claimLink(netns: string): Promise<EgressLink> {
    let made = false;
    const start = Math.floor(Math.random() * this.#subnet.slots);
    let lastError = '';
    for (let i = 0, tries = 0; i < this.#subnet.slots && tries < 64; i++) {
      const slot = (start + i) % this.#subnet.slots;
      if (this.#slots.has(slot)) continue;
      tries++;
      this.#slots.add(slot);
      const link = linkFor(this.#subnet, slot);
      const lines = [...(made ? [] : [`netns add ${netns}`]), ...hostLinkCommands(link, netns)];
      const r = await run(this.#ip, ['-batch', '-'], `${lines.join('\n')}\n`);
      made ||= fs.existsSync(path.join(NETNS_DIR, netns));
      if (r.ok) return link;
      this.#slots.delete(slot);
      lastError = r.out;
      if (!made) break;
      // A half-made pair (the address failed): the namespace's deletion takes it along.
      if (!/File exists/i.test(r.out)) break;
    }
    throw this.#refuse(`no free link in ${this.#subnet.text}: ${lastError}`);
  }

  async #release(name: string, link: EgressLink): Promise<void> {
    const r = await run(this.#ip, ['netns', 'delete', name]);
    if (!r.ok && fs.existsSync(path.join(NETNS_DIR, name))) this.#log?.warn({ netns: name, err: r.out }, 'could not delete a network namespace; the next start sweeps it');
    this.#live.delete(name);
    // The kernel drops the veth pair once the namespace's last process is gone, a moment later.
    setTimeout(() => this.#slots.delete(link.slot), 1000).unref();
  }

  /** Namespaces this manager made that are not released yet. */
  get live(): string[] {
    return [...this.#live.keys()];
  }

  /** Deletes every namespace left and the table: call once the sandboxes are stopped. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const [name, link] of [...this.#live]) await this.#release(name, link);
    if (this.#tableMade) {
      await run(this.#nft, ['delete', 'table', 'inet', tableName(this.#owner)]);
      this.#tableMade = false;
    }
  }

  /** For a process that is exiting without stop(): the same, synchronously. */
  stopSync(): void {
    for (const name of this.#live.keys()) spawnSync(this.#ip, ['netns', 'delete', name], { timeout: 2000 });
    this.#live.clear();
    if (this.#tableMade) spawnSync(this.#nft, ['delete', 'table', 'inet', tableName(this.#owner)], { timeout: 2000 });
  }
}
