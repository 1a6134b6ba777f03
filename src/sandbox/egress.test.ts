// Real namespaces, veths and nftables tables where this machine allows them (root); the refusals everywhere.
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { describe, it } from 'node:test';
import { isFlintError } from '../api/errors.ts';
import { EgressNetworks, egressUnavailableReason } from './egress.ts';

const SUBNET = '10.231.0.0/16';
const skip = egressUnavailableReason() ?? false;

const namespaces = (pid: number) => (fs.existsSync('/run/netns') ? fs.readdirSync('/run/netns').filter((n) => n.startsWith(`flint-${pid}-`)) : []);
const hasTable = (pid: number) => spawnSync('nft', ['list', 'table', 'inet', `flint_${pid}`]).status === 0;

/** What a TCP connection from inside the namespace at `nsPath` to host:port comes to: 'open', 'timeout' or an error code. */
function connectFrom(nsPath: string, host: string, port: number): Promise<string> {
  const code = `const s = require('node:net').connect({ host: ${JSON.stringify(host)}, port: ${port}, timeout: 2000 });
s.on('connect', () => { console.log('open'); s.destroy(); }); s.on('timeout', () => { console.log('timeout'); s.destroy(); });
s.on('error', (e) => console.log(e.code));`;
  return new Promise((resolve) => execFile('nsenter', [`--net=${nsPath}`, '--', process.execPath, '-e', code], (_err, out) => resolve(String(out).trim())));
}

/** The host's first IPv4 address other than loopback and Flint's own veths. */
function hostAddress(): string | undefined {
  for (const [name, list] of Object.entries(os.networkInterfaces())) {
    if (name.startsWith('flv')) continue;
    const a = list?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  return undefined;
}

/** The pid of a process that has exited: the owner of a crashed server's leftovers. */
function deadPid(): number {
  const r = spawnSync('/bin/sh', ['-c', 'echo $$']);
  return Number(String(r.stdout).trim());
}

describe('egress networks', () => {
  it('says why it cannot work: tools missing, or privileges', () => {
    const all = (1n << 64n) - 1n;
    assert.match(egressUnavailableReason(all, (t) => (t === 'nft' ? undefined : `/usr/sbin/${t}`))!, /^nft is not installed/);
    assert.match(egressUnavailableReason(all, () => undefined)!, /^ip, nft, nsenter are not installed/);
    assert.match(egressUnavailableReason(0n, (t) => `/usr/sbin/${t}`)!, /lacks CAP_NET_ADMIN and CAP_SYS_ADMIN/);
    assert.equal(egressUnavailableReason(all, (t) => `/usr/sbin/${t}`), undefined);
  });

  it('makes a namespace per sandbox with its own address, routed through its own veth, and removes it', { skip }, async () => {
    const egress = new EgressNetworks({ subnet: SUBNET });
    try {
      const [a, b] = [await egress.create(), await egress.create()];
      assert.notEqual(a.name, b.name);
      assert.notEqual(a.address, b.address);
      assert.deepEqual(egress.live.sort(), [a.name, b.name].sort());
      assert.ok(hasTable(process.pid), 'the table exists once a namespace does');
      assert.equal(fs.readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim(), '1');
      const inside = execFileSync('ip', ['-n', a.name, '-4', '-o', 'addr']).toString();
      assert.match(inside, new RegExp(`eth0\\s+inet ${a.address.replaceAll('.', '\\.')}/30`));
      assert.match(execFileSync('ip', ['-n', a.name, 'route']).toString(), /^default via /m);
      await a.release();
      await a.release();
      assert.equal(fs.existsSync(a.path), false);
      assert.deepEqual(egress.live, [b.name]);
    } finally {
      await egress.stop();
    }
    assert.deepEqual(namespaces(process.pid), []);
    assert.equal(hasTable(process.pid), false);
    await assert.rejects(egress.create(), (err) => isFlintError(err) && err.code === 'FLINT_ERR_NETWORK_UNAVAILABLE' && /stopping/.test(err.message));
  });

  it("sweeps the namespaces and table of a server that is gone, and nothing of a live one's", { skip }, async () => {
    const dead = deadPid();
    const crashed = new EgressNetworks({ subnet: SUBNET, ownerPid: dead });
    const live = new EgressNetworks({ subnet: SUBNET });
    const sweeper = new EgressNetworks({ subnet: SUBNET });
    try {
      await crashed.create();
      const mine = await live.create();
      assert.equal(namespaces(dead).length, 1);
      assert.ok(hasTable(dead));
      const swept = await sweeper.sweep();
      // Leftovers of other dead servers on this machine may be swept along.
      assert.ok(swept.tables.includes(`flint_${dead}`), String(swept.tables));
      assert.equal(swept.namespaces.filter((n) => n.startsWith(`flint-${dead}-`)).length, 1);
      assert.deepEqual(namespaces(dead), []);
      assert.equal(hasTable(dead), false);
      assert.ok(fs.existsSync(mine.path), 'a live server keeps its own');
    } finally {
      await crashed.stop();
      await live.stop();
    }
  });

  it("keeps one server's functions from the host and from another server's, even after the other server stopped", { skip }, async () => {
    const host = hostAddress();
    const listener = net.createServer((c) => {
      c.on('error', () => {});
      c.end();
    });
    await new Promise<void>((r) => listener.listen(0, '0.0.0.0', r));
    const port = (listener.address() as net.AddressInfo).port;
    // Another server on this host: a live pid that is not this process (the test runner).
    const after: Array<() => void> = [];
    const other = new EgressNetworks({ subnet: SUBNET, ownerPid: process.ppid });
    const mine = new EgressNetworks({ subnet: SUBNET });
    try {
      const theirs = await other.create();
      const ours = await mine.create();
      assert.equal(await connectFrom(ours.path, ours.address, 1), 'ECONNREFUSED', 'the namespace itself works');
      // A service in the other server's sandbox, reachable there.
      const service = spawn('nsenter', [`--net=${theirs.path}`, '--', process.execPath, '-e', `require('node:net').createServer((c) => c.end()).listen(${port}, '0.0.0.0', () => console.log('ready'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
      after.push(() => service.kill());
      await new Promise((r) => service.stdout.once('data', r));
      assert.equal(await connectFrom(theirs.path, theirs.address, port), 'open');
      const gateway = ours.address.replace(/\d+$/, (d) => String(Number(d) - 1));
      const targets = [`${gateway}:${port}`, `${theirs.address}:${port}`, ...(host ? [`${host}:${port}`] : [])];
      for (const t of targets) assert.notEqual(await connectFrom(ours.path, t.split(':')[0], Number(t.split(':')[1])), 'open', t);
      await other.stop();
      assert.equal(hasTable(process.ppid), false);
      for (const t of [`${gateway}:${port}`, ...(host ? [`${host}:${port}`] : [])]) {
        assert.notEqual(await connectFrom(ours.path, t.split(':')[0], Number(t.split(':')[1])), 'open', `${t} once the other server's table is gone`);
      }
    } finally {
      for (const f of after) f();
      await other.stop();
      await mine.stop();
      listener.close();
    }
  });
});
