// A flood of connections that never finish their request head, from several
// client addresses, more than the router's cap: the router keeps to its own
// share, makes room for a real caller by closing idle ones, and the control
// plane, with capacity of its own, keeps answering.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../src/testing/eventually.ts';
import { acceptQueued } from '../src/testing/listeners.ts';
import { flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;
const flood: net.Socket[] = [];

const CAP = 120;
const PER_CLIENT = 50;

/** Opens `n` connections from `localAddress` that send half a request head and then nothing. */
async function halfOpen(port: number, localAddress: string, n: number): Promise<number> {
  let opened = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      const s = net.connect({ port, host: '127.0.0.1', localAddress });
      s.on('error', () => {});
      flood.push(s);
      await new Promise<void>((resolve) => {
        s.once('connect', () => {
          opened++;
          s.write('GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ');
          resolve();
        });
        s.once('close', () => resolve());
      });
    }),
  );
  return opened;
}

async function timed<T>(what: string, f: (signal: AbortSignal) => Promise<T>): Promise<T> {
  // Not a timing assertion: a call the flood had starved would hang, and this
  // turns the hang into a failure that names it.
  const started = Date.now();
  const r = await f(AbortSignal.timeout(20_000));
  console.log(`${what}: ${Date.now() - started} ms`);
  return r;
}

describe('connection limits under a flood of half-open connections', { timeout: 180_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-flood-'));
    server = await startServer({
      sets: ['authentication.enabled=true', `router.maxConnections=${CAP}`, `router.maxConnectionsPerClient=${PER_CLIENT}`, 'router.headersTimeoutSeconds=120'],
    });
    fs.writeFileSync(path.join(work, 'hello.js'), 'module.exports = async () => ({ status: 200, body: "hello\\n" });');
    for (const args of [
      ['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1'],
      ['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js'],
      ['route', 'create', '--name', 'hello', '--url', '/hello', '--function', 'hello'],
    ]) {
      const r = flint(server, args, { cwd: work });
      assert.equal(r.code, 0, r.stderr);
    }
  });
  after(async () => {
    for (const s of flood) s.destroy();
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('keeps the control plane and an authenticated function call answering, and counts what it closed', async () => {
    const port = Number(new URL(server.routerUrl).port);
    // Four addresses of 127/8 stand for four attacking hosts: 200 connections against a cap of 120.
    const attackers = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
    // Each attacker's connections are all accepted before the next comes: the router listens on a group of sockets
    // (limits/listener-group.ts), whose queues it takes in no set order, and the oldest idle connection goes first.
    const accepted = () => eventually(() => acceptQueued(port) === 0, 'the router accepted every connection made');
    for (const a of attackers) {
      await halfOpen(port, a, PER_CLIENT);
      await accepted();
    }
    // More from the latest attacker, whose connections are the newest and all still open: refused at its share.
    await halfOpen(port, attackers[3], 5);
    await accepted();
    const stillOpen = () => flood.filter((s) => !s.destroyed && s.readyState === 'open').length;
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(stillOpen() <= CAP, `the router kept to its cap: ${stillOpen()} flood connections open`);

    const health = await timed('control plane /healthz', (signal) => fetch(`${server.controllerUrl}/healthz`, { signal }));
    assert.equal(health.status, 200);
    const creds = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'private', 'router-credentials.json'), 'utf8'));
    const login = await timed('router login', (signal) =>
      fetch(`${server.routerUrl}/auth/login`, { method: 'POST', body: JSON.stringify({ username: creds.username, password: creds.password }), signal }),
    );
    assert.equal(login.status, 201);
    const { accesstoken } = (await login.json()) as { accesstoken: string };
    const call = await timed('authenticated function call', (signal) => fetch(`${server.routerUrl}/hello`, { headers: { authorization: `Bearer ${accesstoken}` }, signal }));
    assert.equal(call.status, 200);
    assert.equal(await call.text(), 'hello\n');

    const adminToken = fs.readFileSync(path.join(server.dataDir, 'private', 'admin-token'), 'utf8').trim();
    const metrics = await (await fetch(`${server.controllerUrl}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })).text();
    const count = (reason: string) => Number(new RegExp(`flint_connections_dropped_total\\{listener="router",reason="${reason}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);
    assert.ok(count('evicted') >= 200 - CAP, `evicted: ${count('evicted')}\n${metrics.split('\n').filter((l) => l.includes('dropped')).join('\n')}`);
    assert.ok(count('per_client') >= 5, `per_client: ${count('per_client')}`);
  });
});
