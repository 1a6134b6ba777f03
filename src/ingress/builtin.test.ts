import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { listenersOn } from '../testing/listeners.ts';
import { type BuiltinGateway, createBuiltinGateway, normalizeHost } from './builtin.ts';
import {
  type EchoRouter,
  httpSender,
  ingress,
  runIngressProviderContract,
  sendUpgrade,
  startEchoRouter,
  UPGRADE_REFUSAL,
  type UpgradeClient,
} from './provider.contract.ts';

let gw: BuiltinGateway | undefined;

runIngressProviderContract('builtin', {
  async setup({ routerUrl }) {
    // Each listener a group of four sockets, so the contract runs through the group (limits/listener-group.ts), HTTPS too.
    gw = createBuiltinGateway({ routerUrl, port: 0, httpsPort: 0, acceptSockets: 4 });
    await gw.start();
    const g = gw;
    return {
      provider: g,
      send: httpSender(() => ({ url: g.url, httpsUrl: g.httpsUrl })),
      listener: () => ({ url: g.url, httpsUrl: g.httpsUrl }),
      capabilities: { traffic: true, https: true, rewrite: true, strictPaths: true },
    };
  },
  async teardown() {
    await gw?.stop();
  },
});

describe('builtin gateway', () => {
  it('listens on a group of sockets for HTTP and for HTTPS, and closes them all when it stops', { skip: process.platform !== 'linux' && 'Linux only' }, async () => {
    const g = createBuiltinGateway({ routerUrl: 'http://127.0.0.1:9', port: 0, httpsPort: 0, acceptSockets: 3 });
    await g.start();
    const ports = [Number(new URL(g.url).port), Number(new URL(g.httpsUrl as string).port)];
    try {
      assert.deepEqual(ports.map(listenersOn), [3, 3]);
    } finally {
      await g.stop();
    }
    assert.deepEqual(ports.map(listenersOn), [0, 0]);
  });

  it('normalizes Host headers', () => {
    assert.equal(normalizeHost('A.Example.TEST:8081'), 'a.example.test');
    assert.equal(normalizeHost('example.test.'), 'example.test');
    assert.equal(normalizeHost('[::1]:80'), '[::1]');
    assert.equal(normalizeHost(undefined), '');
  });

  it('answers 502 when the router is down and 404 for non-path request targets', async () => {
    const router = await startEchoRouter();
    const url = router.url;
    await router.close();
    const g = createBuiltinGateway({ routerUrl: url, port: 0 });
    await g.start();
    try {
      await g.apply([ingress('x')]);
      const res = await fetch(`${g.url}/x`);
      assert.equal(res.status, 502);
      await res.text();
      const status = await new Promise<number>((resolve, reject) => {
        const u = new URL(g.url);
        const req = http.request({ host: u.hostname, port: u.port, path: '*', method: 'OPTIONS' }, (r) => {
          r.resume();
          resolve(r.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(status, 404);
    } finally {
      await g.stop();
    }
  });

  it('closes kept-alive connections during its stop instead of serving more on them, and stops even when whileTunnelsOpen fails', async () => {
    // A router that answers after a moment and says when a request has reached it.
    let arrived: () => void = () => {};
    const slow = http.createServer((_req, res) => {
      arrived();
      setTimeout(() => res.end('ok'), 200);
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    const g = createBuiltinGateway({ routerUrl: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`, port: 0 });
    await g.start();
    await g.apply([ingress('x')]);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
        const u = new URL(g.url);
        const req = http.request({ host: u.hostname, port: u.port, path: '/x', agent }, (r) => {
          r.resume();
          r.on('end', () => resolve({ status: r.statusCode ?? 0, connection: r.headers.connection }));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      assert.deepEqual(await get(), { status: 200, connection: 'keep-alive' });
      // A request on the kept-alive connection is at the router when the stop begins.
      const reached = new Promise<void>((r) => {
        arrived = r;
      });
      const during = get();
      await reached;
      const stopped = g.stop(async () => {
        assert.deepEqual(await during, { status: 200, connection: 'close' }, 'answered, and the connection is not kept');
        throw new Error('the router failed to stop');
      });
      await assert.rejects(stopped, /the router failed to stop/);
      await assert.rejects(get(), /ECONNREFUSED/, 'the listener is closed all the same');
    } finally {
      agent.destroy();
      slow.closeAllConnections();
      slow.close();
    }
  });

  describe('upgrades', () => {
    let router: EchoRouter;
    let g: BuiltinGateway;
    beforeEach(async () => {
      router = await startEchoRouter();
      g = createBuiltinGateway({ routerUrl: router.url, port: 0 });
      await g.start();
      await g.apply([ingress('chat'), ingress('refuse')]);
    });
    afterEach(async () => {
      await g.stop();
      await router.close();
    });
    const open = async (): Promise<UpgradeClient> => {
      const c = await sendUpgrade({ url: g.url, host: 'h.test', path: '/chat' });
      assert.equal(c.status, 101, c.raw);
      return c;
    };

    it('answers 502 in the shape of its other errors when the router is down', { timeout: 30_000 }, async () => {
      await router.close();
      const c = await sendUpgrade({ url: g.url, host: 'h.test', path: '/chat' });
      assert.equal(c.status, 502, c.raw);
      assert.match(c.raw, /\r\ncontent-type: text\/plain; charset=utf-8\r\n/);
      assert.equal(c.body, 'bad gateway: the router did not answer');
      const plain = await fetch(`${g.url}/chat`);
      assert.equal(await plain.text(), c.body, 'the same answer as a plain request gets');
      await c.closed;
    });

    it('passes a refusal back byte for byte and lets no further request through to the router', { timeout: 30_000 }, async () => {
      // A second request right behind the upgrade, for a path no ingress exposes.
      const c = await sendUpgrade({ url: g.url, host: 'h.test', path: '/refuse', extra: 'GET /hidden HTTP/1.1\r\nHost: h.test\r\n\r\n' });
      assert.equal(c.raw, UPGRADE_REFUSAL);
      await c.closed;
      const r = router.upgrades.at(-1)!;
      await r.closed;
      assert.equal(Buffer.concat(r.after).toString(), '', 'nothing after the refused upgrade reached the router');
      assert.equal(router.received.length, 0);
    });

    it('serves an h2c offer as a plain request', { timeout: 30_000 }, async () => {
      const c = await sendUpgrade({ url: g.url, host: 'h.test', path: '/chat', protocol: 'h2c', headers: { 'HTTP2-Settings': 'AAMAAABkAAQAoAAAAAIAAAAA' } });
      c.socket.destroy();
      assert.equal(c.status, 200, c.raw);
      assert.equal(JSON.parse(c.body).echo.url, '/chat');
      assert.equal(router.upgrades.length, 0);
    });

    it('closes the router side when the client goes away', { timeout: 30_000 }, async () => {
      const c = await open();
      c.socket.destroy();
      await router.upgrades.at(-1)!.closed;
    });

    it('closes the client when the router side goes away', { timeout: 30_000 }, async () => {
      const c = await open();
      router.upgrades.at(-1)!.socket.destroy();
      await c.closed;
    });

    it('stops with a tunnel open, closing both sides', { timeout: 30_000 }, async () => {
      const c = await open();
      c.socket.write('still here');
      assert.equal((await c.read(10)).toString(), 'still here');
      await g.stop();
      await c.closed;
      await router.upgrades.at(-1)!.closed;
    });
  });
});
