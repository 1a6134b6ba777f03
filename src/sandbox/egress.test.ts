// Real namespaces, veths and nftables tables where this machine allows them (root); the refusals everywhere.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { isFlintError } from '../api/errors.ts';
import { EgressNetworks, egressUnavailableReason } from './egress.ts';

const SUBNET = '10.231.0.0/16';
const skip = egressUnavailableReason() ?? false;

const namespaces = (pid: number) => (fs.existsSync('/run/netns') ? fs.readdirSync('/run/netns').filter((n) => n.startsWith(`flint-${pid}-`)) : []);
const hasTable = (pid: number) => spawnSync('nft', ['list', 'table', 'inet', `flint_${pid}`]).status === 0;

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
});
