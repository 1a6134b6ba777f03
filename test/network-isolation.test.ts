// Networked functions reach the world, not the host. A real `flint server`
// and the real CLI; "the internet" is a network namespace of the test's own
// with its own address and an HTTP server, joined to the host by a veth
// pair. A probe function (environment created with --externalnetwork) tries
// TCP connections to whatever it is told and reports what happened; every
// host service it must not reach is first shown to be listening from the
// host, so a refusal means the boundary held and not that nothing was there.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { egressUnavailableReason } from '../src/sandbox/egress.ts';
import { chooseResolvConf, nameservers } from '../src/sandbox/resolv.ts';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

const PROBE = `
const net = require('node:net');
const os = require('node:os');
// Something for another function to try to reach.
net.createServer((s) => { s.on('error', () => {}); s.end('probe\\n'); }).listen(9000, '0.0.0.0');
function attempt(target) {
  const i = target.lastIndexOf(':');
  return new Promise((resolve) => {
    const s = net.connect({ host: target.slice(0, i), port: Number(target.slice(i + 1)), timeout: 3000 });
    s.once('connect', () => { s.destroy(); resolve('open'); });
    s.once('timeout', () => { s.destroy(); resolve('timeout'); });
    s.once('error', (e) => resolve(e.code || e.message));
  });
}
module.exports = async (context) => {
  const q = context.request.query;
  const targets = String(q.targets || '').split(',').filter(Boolean);
  const outcomes = await Promise.all(targets.map(attempt));
  const page = q.fetch ? await fetch(q.fetch).then((r) => r.text(), (e) => 'error: ' + ((e.cause && e.cause.code) || e.message)) : null;
  const addresses = Object.values(os.networkInterfaces()).flat().filter((a) => a.family === 'IPv4').map((a) => a.address);
  return { status: 200, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ instance: os.hostname(), addresses, page, results: Object.fromEntries(targets.map((t, n) => [t, outcomes[n]])) }) };
};`;

const INTERNET_NS = `flinttest-inet-${process.pid}`;
const INTERNET_VETH = `fti${process.pid % 1_000_000}`;
const INTERNET_GATEWAY = '198.51.100.1';
const INTERNET_ADDRESS = '198.51.100.2';
const INTERNET_PORT = 8080;

function skipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root: network namespaces, veth pairs and nftables';
  if (spawnSync('bwrap', ['--version']).status !== 0) return 'bubblewrap is not installed';
  return egressUnavailableReason();
}
const skip = skipReason();

function ip(args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** The host's first address other than loopback and the test's own veth. */
function hostAddress(): string | undefined {
  for (const [name, list] of Object.entries(os.networkInterfaces())) {
    if (name.startsWith('flv') || name === INTERNET_VETH) continue;
    const a = list?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  return undefined;
}

function listen(host: string): Promise<net.Server> {
  return new Promise((resolve) => {
    const s = net.createServer((c) => {
      // The test's own probes from the host hang up at once.
      c.on('error', () => {});
      c.end('host service\n');
    });
    s.listen(0, host, () => resolve(s));
  });
}

const portOf = (s: net.Server) => (s.address() as net.AddressInfo).port;
const portOfUrl = (u: string) => Number(new URL(u).port);

/** Whether something listens at host:port, seen from the host. */
function reachableFromHost(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 3000 });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(false));
  });
}

function netnsOf(pid: number): string[] {
  return fs.existsSync('/run/netns') ? fs.readdirSync('/run/netns').filter((n) => n.startsWith(`flint-${pid}-`)) : [];
}

function tableExists(pid: number): boolean {
  return spawnSync('nft', ['list', 'table', 'inet', `flint_${pid}`]).status === 0;
}

interface ProbeAnswer {
  /** The sandbox's hostname: the instance id. */
  instance: string;
  addresses: string[];
  page: string | null;
  results: Record<string, string>;
}

describe('network isolation of functions with external network', { skip }, () => {
  let server: TestServer;
  let work: string;
  let internet: ChildProcess;
  const hostServices: net.Server[] = [];

  const ok = (args: string[]) => {
    const r = flint(server, args, { cwd: work });
    assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
  };

  async function probe(fn: string, query: Record<string, string>): Promise<ProbeAnswer> {
    return eventually(async () => {
      const res = await fetch(`${server.routerUrl}/flint-function/${fn}?${new URLSearchParams(query)}`);
      const text = await res.text();
      return res.status === 200 ? (JSON.parse(text) as ProbeAnswer) : undefined;
    }, `function ${fn} to answer`);
  }

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-net-'));
    fs.writeFileSync(path.join(work, 'probe.js'), PROBE);
    // "The internet": its own namespace and address, one HTTP server in it.
    ip(['netns', 'add', INTERNET_NS]);
    ip(['link', 'add', INTERNET_VETH, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', INTERNET_NS]);
    ip(['addr', 'add', `${INTERNET_GATEWAY}/24`, 'dev', INTERNET_VETH]);
    ip(['link', 'set', INTERNET_VETH, 'up']);
    ip(['-n', INTERNET_NS, 'addr', 'add', `${INTERNET_ADDRESS}/24`, 'dev', 'eth0']);
    ip(['-n', INTERNET_NS, 'link', 'set', 'eth0', 'up']);
    ip(['-n', INTERNET_NS, 'link', 'set', 'lo', 'up']);
    const code = `require('node:http').createServer((q, s) => s.end('from the internet\\n')).listen(${INTERNET_PORT}, '0.0.0.0', () => console.log('ready'))`;
    internet = spawn('ip', ['netns', 'exec', INTERNET_NS, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      internet.stdout!.once('data', () => resolve());
      internet.once('exit', (c) => reject(new Error(`the internet's HTTP server exited (${c})`)));
    });
    // Host services a function must not reach: a broker-like listener on loopback, one on every address.
    hostServices.push(await listen('127.0.0.1'), await listen('0.0.0.0'));
    server = await startServer({ sets: ['ingress.host=0.0.0.0'] });
    ok(['env', 'create', '--name', 'net', '--image', 'flint/node-env', '--externalnetwork', '--poolsize', '1']);
    ok(['env', 'create', '--name', 'offline', '--image', 'flint/node-env', '--poolsize', '1']);
    for (const [name, env] of [['probe', 'net'], ['other', 'net'], ['shut', 'offline']]) {
      ok(['fn', 'create', '--name', name, '--env', env, '--code', path.join(work, 'probe.js')]);
    }
  });

  after(async () => {
    await server?.stop();
    for (const s of hostServices) s.close();
    internet?.kill();
    spawnSync('ip', ['netns', 'delete', INTERNET_NS]);
    spawnSync('ip', ['link', 'delete', INTERNET_VETH]);
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('reaches a server on the internet, through an address of its own', async () => {
    const r = await probe('probe', { fetch: `http://${INTERNET_ADDRESS}:${INTERNET_PORT}/`, targets: `${INTERNET_ADDRESS}:${INTERNET_PORT}` });
    assert.equal(r.page, 'from the internet\n');
    assert.equal(r.results[`${INTERNET_ADDRESS}:${INTERNET_PORT}`], 'open');
    const own = r.addresses.filter((a) => !a.startsWith('127.'));
    assert.equal(own.length, 1, `one address besides loopback: ${r.addresses}`);
    assert.notEqual(own[0], hostAddress(), 'not the host network');
  });

  it('cannot reach the control plane, router, ingress, a broker on loopback or any service of the host', async () => {
    const [loopbackBroker, anyAddress] = hostServices;
    const host = hostAddress();
    const targets: string[] = [
      `127.0.0.1:${portOfUrl(server.controllerUrl)}`,
      `127.0.0.1:${portOfUrl(server.routerUrl)}`,
      `127.0.0.1:${portOfUrl(server.ingressUrl!)}`,
      `127.0.0.1:${portOf(loopbackBroker)}`,
      `127.0.0.1:${portOf(anyAddress)}`,
      // The host's addresses: its gateway address towards "the internet", and its own network address.
      `${INTERNET_GATEWAY}:${portOf(anyAddress)}`,
      `${INTERNET_GATEWAY}:${portOfUrl(server.ingressUrl!)}`,
    ];
    if (host) targets.push(`${host}:${portOf(anyAddress)}`, `${host}:${portOfUrl(server.ingressUrl!)}`);
    for (const t of targets) {
      const i = t.lastIndexOf(':');
      assert.ok(await reachableFromHost(t.slice(0, i), Number(t.slice(i + 1))), `${t} listens on the host`);
    }
    const r = await probe('probe', { targets: targets.join(',') });
    // Its own gateway (the host end of its veth) is a host address too.
    const inner = r.addresses.find((a) => !a.startsWith('127.'))!;
    const gateway = inner.replace(/\d+$/, (d) => String(Number(d) - 1));
    const viaGateway = await probe('probe', { targets: `${gateway}:${portOf(anyAddress)},${gateway}:${portOfUrl(server.controllerUrl)}` });
    for (const [t, outcome] of Object.entries({ ...r.results, ...viaGateway.results })) assert.notEqual(outcome, 'open', `${t} must be out of reach`);
    // The control plane is not reachable from the function in any way, so the old hole is closed.
    assert.equal(Object.keys(r.results).length, targets.length);
  });

  it('cannot reach another networked function', async () => {
    const other = await probe('other', { targets: '127.0.0.1:9000' });
    assert.equal(other.results['127.0.0.1:9000'], 'open', 'the other function listens in its own namespace');
    const otherAddress = other.addresses.find((a) => !a.startsWith('127.'))!;
    const self = await probe('other', { targets: `${otherAddress}:9000` });
    assert.equal(self.instance, other.instance, 'the same instance');
    assert.equal(self.results[`${otherAddress}:9000`], 'open', 'and on its own address');
    const r = await probe('probe', { targets: `${otherAddress}:9000` });
    assert.notEqual(r.results[`${otherAddress}:9000`], 'open');
    const mine = r.addresses.find((a) => !a.startsWith('127.'));
    assert.notEqual(mine, otherAddress, 'each instance has a namespace of its own');
  });

  it("reaches the host's DNS resolver when it is on the network, not on the host", async (t) => {
    const choice = chooseResolvConf();
    const server = nameservers(fs.readFileSync(choice.file, 'utf8'))[0];
    if (choice.warning || !server || server.includes(':') || !(await reachableFromHost(server, 53))) {
      t.skip(`no resolver on the network this host reaches over TCP: ${choice.warning ?? server ?? 'none'}`);
      return;
    }
    const r = await probe('probe', { targets: `${server}:53` });
    assert.equal(r.results[`${server}:53`], 'open');
  });

  it('keeps a function without external network on loopback only', async () => {
    const r = await probe('shut', { fetch: `http://${INTERNET_ADDRESS}:${INTERNET_PORT}/`, targets: `${INTERNET_ADDRESS}:${INTERNET_PORT}` });
    assert.deepEqual(r.addresses, ['127.0.0.1']);
    assert.match(r.page!, /^error: /);
    assert.notEqual(r.results[`${INTERNET_ADDRESS}:${INTERNET_PORT}`], 'open');
  });

  it('names everything after the server, and removes it all when the server stops', async () => {
    const pid = server.child.pid!;
    assert.ok(netnsOf(pid).length >= 2, `namespaces flint-${pid}-*: ${netnsOf(pid)}`);
    assert.ok(tableExists(pid), `nftables table inet flint_${pid}`);
    ok(['fn', 'delete', '--name', 'other']);
    await server.stop();
    assert.deepEqual(netnsOf(pid), []);
    assert.equal(tableExists(pid), false);
    server = undefined as unknown as TestServer;
  });
});

describe('network namespaces left by a server that was killed', { skip }, () => {
  it('are swept by the next start', async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-net-'));
    const first = await startServer();
    let second: TestServer | undefined;
    try {
      flint(first, ['env', 'create', '--name', 'net', '--image', 'flint/node-env', '--externalnetwork', '--poolsize', '2']);
      const pid = first.child.pid!;
      await eventually(async () => (netnsOf(pid).length === 2 && tableExists(pid) ? true : undefined), 'the pool to get its namespaces');
      await first.kill();
      assert.equal(netnsOf(pid).length, 2, 'SIGKILL left them behind');
      second = await startServer();
      assert.deepEqual(netnsOf(pid), []);
      assert.equal(tableExists(pid), false);
    } finally {
      await first.kill();
      await second?.stop();
      fs.rmSync(work, { recursive: true, force: true });
    }
  });
});

describe('a server that may not manage networks', { skip: skip ?? (spawnSync('setpriv', ['--version']).status !== 0 ? 'setpriv is not installed' : undefined) }, () => {
  it('refuses functions with external network, naming why, and never shares the host network', async () => {
    // Root without CAP_NET_ADMIN: the server runs, but may not make network namespaces or nftables tables.
    const server = await startServer({ launcher: ['setpriv', '--bounding-set=-net_admin', '--inh-caps=-net_admin', '--'] });
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-net-'));
    try {
      assert.match(server.output(), /sandboxes cannot get a network of their own here.*CAP_NET_ADMIN/);
      fs.writeFileSync(path.join(work, 'probe.js'), PROBE);
      for (const args of [
        ['env', 'create', '--name', 'net', '--image', 'flint/node-env', '--externalnetwork', '--poolsize', '0'],
        ['fn', 'create', '--name', 'probe', '--env', 'net', '--code', path.join(work, 'probe.js')],
      ]) {
        const r = flint(server, args);
        assert.equal(r.code, 0, r.stderr);
      }
      const res = await fetch(`${server.routerUrl}/flint-function/probe`);
      const body = (await res.json()) as { code?: string; message?: string; error?: { code: string; message: string } };
      assert.equal(res.status, 503, JSON.stringify(body));
      assert.match(JSON.stringify(body), /FLINT_ERR_NETWORK_UNAVAILABLE/);
      assert.match(JSON.stringify(body), /CAP_NET_ADMIN/);
      const log = flint(server, ['fn', 'log', '--name', 'probe']);
      assert.match(log.stdout, /external network was asked for.*CAP_NET_ADMIN/);
    } finally {
      await server.stop();
      fs.rmSync(work, { recursive: true, force: true });
    }
  });
});
