// A listener as a SO_REUSEPORT group: every socket serves, the group goes
// away whole, and nobody else gets into it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { describe, it } from 'node:test';
import { listenersOn } from '../testing/listeners.ts';
import { closeGroup, listenServerGroup } from './listener-group.ts';
import { limitNodeServer } from './node-server.ts';

const linux = process.platform === 'linux';

async function get(port: number): Promise<string> {
  const socket = net.connect(port, '127.0.0.1');
  let got = '';
  socket.on('data', (d) => (got += d.toString('latin1')));
  socket.on('error', () => {});
  socket.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  await new Promise((resolve) => socket.on('close', resolve));
  return got;
}

/** An http.Server on a group of `sockets`, fed the other sockets' connections as the builtin gateway is. */
async function httpGroup(sockets: number, port = 0) {
  const server = http.createServer((_req, res) => res.end('ok'));
  const group = await listenServerGroup(server, { port, host: '127.0.0.1', backlog: 511, sockets });
  return {
    server,
    port: group.address.port,
    async close() {
      const closing = closeGroup([server, ...group.more]);
      server.closeAllConnections();
      await closing;
    },
  };
}

/** Tries to listen on `port`, alone or in a reuseport group, as another user; the errno's name, or 'listening'. */
function listenAsNobody(port: number, reusePort: boolean): string {
  const code = `
import errno, socket
s = socket.socket()
${reusePort ? 's.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)' : ''}
try:
    s.bind(('127.0.0.1', ${port})); s.listen(); print('listening')
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))`;
  const r = spawnSync('python3', ['-c', code], { uid: 65534, gid: 65534, encoding: 'utf8' });
  return r.error ? `spawn failed: ${r.error.message}` : r.stdout.trim() || r.stderr.trim();
}

describe('listener groups (SO_REUSEPORT)', { skip: !linux && 'SO_REUSEPORT groups are Linux only' }, () => {
  it('listens on as many sockets as asked, all on one port; every connection is served, and closing frees them all', async () => {
    const g = await httpGroup(4);
    try {
      assert.equal(listenersOn(g.port), 4);
      // The kernel hands each new connection to one socket of the group, by a hash of its addresses.
      const answers = await Promise.all(Array.from({ length: 64 }, () => get(g.port)));
      for (const a of answers) assert.match(a, /^HTTP\/1\.1 200 .*ok$/s);
    } finally {
      await g.close();
    }
    assert.equal(listenersOn(g.port), 0);
  });

  it("feeds the other sockets' connections through the server's own connection caps", async () => {
    const server = http.createServer((_req, res) => setTimeout(() => res.end('ok'), 200));
    const drops: string[] = [];
    limitNodeServer(server, { maxConnections: 0, maxConnectionsPerClient: 3, headersTimeoutMs: 10_000, keepAliveTimeoutMs: 10_000 }, (why) => drops.push(why));
    const group = await listenServerGroup(server, { port: 0, host: '127.0.0.1', backlog: 511, sockets: 4 });
    try {
      const answers = await Promise.all(Array.from({ length: 8 }, () => get(group.address.port)));
      assert.equal(answers.filter((a) => a.includes(' 200 ')).length, 3, 'one client address holds 3 connections at most, whichever socket took them');
      assert.deepEqual([...new Set(drops)], ['per_client']);
      assert.equal(drops.length, 5);
    } finally {
      const closing = closeGroup([server, ...group.more]);
      server.closeAllConnections();
      await closing;
    }
  });

  it('one plain socket when asked for one, which nothing can join', async () => {
    const g = await httpGroup(1);
    try {
      assert.equal(listenersOn(g.port), 1);
      await assert.rejects(httpGroup(2, g.port), { code: 'EADDRINUSE' });
    } finally {
      await g.close();
    }
  });

  it('a second server on a port a group holds fails as on any taken port, instead of joining the group and taking a share of its connections', async () => {
    const g = await httpGroup(4);
    try {
      await assert.rejects(httpGroup(4, g.port), { code: 'EADDRINUSE' });
      await assert.rejects(httpGroup(1, g.port), { code: 'EADDRINUSE' });
      assert.equal(listenersOn(g.port), 4, 'the failed starts left nothing behind');
      assert.match(await get(g.port), / 200 /);
    } finally {
      await g.close();
    }
  });

  it('a process of another user cannot join the group to steal connections, nor take the port', { skip: process.getuid?.() !== 0 && 'needs root to run a process as another user' }, async () => {
    const g = await httpGroup(4);
    try {
      assert.equal(listenAsNobody(g.port, true), 'EADDRINUSE');
      assert.equal(listenAsNobody(g.port, false), 'EADDRINUSE');
      assert.equal(listenersOn(g.port), 4);
    } finally {
      await g.close();
    }
  });

  it('takes an explicit free port with the whole group, and leaves it free after closing', async () => {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const g = await httpGroup(3, port);
    assert.equal(listenersOn(port), 3);
    await g.close();
    const again = net.createServer();
    await new Promise<void>((resolve, reject) => {
      again.once('error', reject);
      again.listen({ port, host: '127.0.0.1', exclusive: true }, resolve);
    });
    await new Promise((resolve) => again.close(resolve));
  });
});
