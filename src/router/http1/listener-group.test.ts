// The router's listening sockets as one SO_REUSEPORT group: every socket
// serves, the group goes away whole, and nobody else gets into it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { describe, it } from 'node:test';
import type { Http1Request } from './request.ts';
import type { Http1Response } from './response.ts';
import { Http1Server } from './server.ts';

const linux = process.platform === 'linux';

function groupServer(acceptSockets: number): Http1Server {
  return new Http1Server({
    keepAliveTimeoutMs: 65_000,
    headersTimeoutMs: 66_000,
    acceptSockets,
    handle(_req: Http1Request, res: Http1Response) {
      res.writeHead(200, ['Content-Length', '2']);
      res.end('ok');
    },
    refuse() {},
    handlerFailed(err) {
      throw err;
    },
  });
}

/** Listening TCP sockets on `port`, from the kernel's own table. */
function listenersOn(port: number): number {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let n = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!fs.existsSync(table)) continue;
    for (const line of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[1]?.endsWith(hex) && f[3] === '0A') n++;
    }
  }
  return n;
}

async function get(port: number): Promise<string> {
  const socket = net.connect(port, '127.0.0.1');
  let got = '';
  socket.on('data', (d) => (got += d.toString('latin1')));
  socket.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  await new Promise((resolve) => socket.on('close', resolve));
  return got;
}

/** Tries to listen on `port`, alone or in a reuseport group, as another user; returns the error's name or 'listening'. */
function listenAsNobody(port: number, reusePort: boolean): string {
  const code = `
import socket, sys
s = socket.socket()
${reusePort ? 's.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)' : ''}
try:
    s.bind(('127.0.0.1', ${port})); s.listen(); print('listening')
except OSError as e:
    import errno; print(errno.errorcode.get(e.errno, str(e.errno)))`;
  const r = spawnSync('python3', ['-c', code], { uid: 65534, gid: 65534, encoding: 'utf8' });
  return r.error ? `spawn failed: ${r.error.message}` : r.stdout.trim() || r.stderr.trim();
}

describe('the router listener group (SO_REUSEPORT)', { skip: !linux && 'SO_REUSEPORT groups are Linux only' }, () => {
  it('listens on as many sockets as asked, all on one port, and every one of them serves', async () => {
    const server = groupServer(4);
    const { port } = await server.listen(0, '127.0.0.1');
    try {
      assert.equal(listenersOn(port), 4);
      // The kernel hands each new connection to one socket of the group, by a hash of its addresses.
      const answers = await Promise.all(Array.from({ length: 64 }, () => get(port)));
      for (const a of answers) assert.match(a, /^HTTP\/1\.1 200 .*ok$/s);
    } finally {
      await server.close(1000);
    }
    assert.equal(listenersOn(port), 0, 'every socket of the group is closed');
  });

  it('one socket when asked for one, as before', async () => {
    const server = groupServer(1);
    const { port } = await server.listen(0, '127.0.0.1');
    try {
      assert.equal(listenersOn(port), 1);
      // Without SO_REUSEPORT on it, nothing can join it.
      await assert.rejects(groupServer(2).listen(port, '127.0.0.1'), { code: 'EADDRINUSE' });
    } finally {
      await server.close(1000);
    }
  });

  it('a second server on a port the group holds fails as on any taken port, instead of joining the group and taking its share of connections', async () => {
    const server = groupServer(4);
    const { port } = await server.listen(0, '127.0.0.1');
    try {
      await assert.rejects(groupServer(4).listen(port, '127.0.0.1'), { code: 'EADDRINUSE' });
      await assert.rejects(groupServer(1).listen(port, '127.0.0.1'), { code: 'EADDRINUSE' });
      assert.equal(listenersOn(port), 4, 'the failed starts left nothing behind');
      assert.match(await get(port), /200/);
    } finally {
      await server.close(1000);
    }
  });

  it('a process of another user cannot join the group to steal connections', { skip: process.getuid?.() !== 0 && 'needs root to run a process as another user' }, async () => {
    const server = groupServer(4);
    const { port } = await server.listen(0, '127.0.0.1');
    try {
      assert.equal(listenAsNobody(port, true), 'EADDRINUSE');
      assert.equal(listenAsNobody(port, false), 'EADDRINUSE');
      assert.equal(listenersOn(port), 4);
    } finally {
      await server.close(1000);
    }
  });

  it('an explicit free port is taken by the whole group, and is free again after close', async () => {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const server = groupServer(3);
    await server.listen(port, '127.0.0.1');
    assert.equal(listenersOn(port), 3);
    await server.close(1000);
    const again = net.createServer();
    await new Promise<void>((resolve, reject) => {
      again.once('error', reject);
      again.listen({ port, host: '127.0.0.1', exclusive: true }, resolve);
    });
    await new Promise((resolve) => again.close(resolve));
  });
});
