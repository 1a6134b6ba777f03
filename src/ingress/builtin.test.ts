import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it } from 'node:test';
import { type BuiltinGateway, createBuiltinGateway, normalizeHost } from './builtin.ts';
import { httpSender, ingress, runIngressProviderContract, startEchoRouter } from './provider.contract.ts';

let gw: BuiltinGateway | undefined;

runIngressProviderContract('builtin', {
  async setup({ routerUrl }) {
    gw = createBuiltinGateway({ routerUrl, port: 0, httpsPort: 0 });
    await gw.start();
    const g = gw;
    return {
      provider: g,
      send: httpSender(() => ({ url: g.url, httpsUrl: g.httpsUrl })),
      capabilities: { traffic: true, https: true, rewrite: true, strictPaths: true },
    };
  },
  async teardown() {
    await gw?.stop();
  },
});

describe('builtin gateway', () => {
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
});
