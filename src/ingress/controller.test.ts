import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { HTTPTrigger, HTTPTriggerSpec, Secret } from '../api/kinds.ts';
import { openSqliteStore, type SqliteStore } from '../store/sqlite.ts';
import { type BuiltinGateway, createBuiltinGateway } from './builtin.ts';
import { createIngressController, type IngressController } from './controller.ts';
import { type EchoRouter, makeSelfSignedCert, startEchoRouter } from './provider.contract.ts';
import type { ApplyResult, IngressProvider, IngressSpec } from './provider.ts';

function route(name: string, spec: Partial<HTTPTriggerSpec>, namespace = 'default'): HTTPTrigger {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'HTTPTrigger',
    metadata: { name, namespace } as HTTPTrigger['metadata'],
    spec: { functionref: { type: 'name', name: 'fn' }, relativeurl: `/${name}`, ...spec },
  };
}

function secret(name: string, data: Record<string, string>, namespace = 'default'): Secret {
  return { apiVersion: 'flint.dev/v1', kind: 'Secret', metadata: { name, namespace } as Secret['metadata'], data };
}

async function eventually<T>(fn: () => Promise<T | undefined | false>, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Counts applies and can be told to fail, around a real gateway. */
function recording(inner: IngressProvider) {
  const calls: Array<readonly IngressSpec[]> = [];
  let failures = 0;
  const p: IngressProvider & { calls: typeof calls; failNext(n: number): void } = {
    kind: inner.kind,
    calls,
    failNext(n) {
      failures = n;
    },
    start: () => inner.start(),
    stop: () => inner.stop(),
    async apply(desired): Promise<ApplyResult> {
      calls.push(desired);
      if (failures > 0) {
        failures--;
        throw new Error('injected failure');
      }
      return inner.apply(desired);
    },
  };
  return p;
}

describe('ingress controller over the sqlite store and the builtin gateway', () => {
  let dir: string;
  let store: SqliteStore;
  let router: EchoRouter;
  let gw: BuiltinGateway;
  let provider: ReturnType<typeof recording>;
  let controller: IngressController;

  // fetch() cannot set Host; node:http can.
  const status = (p: string, host = 'h.test') =>
    new Promise<number>((resolve, reject) => {
      const u = new URL(gw.url);
      const req = http.get({ host: u.hostname, port: u.port, path: p, headers: { host }, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
    });

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ingress-ctl-'));
    store = openSqliteStore(path.join(dir, 'flint.db'));
    router = await startEchoRouter();
    await store.create(route('early', { createingress: true }));
    await store.create(route('plain', {}));
    gw = createBuiltinGateway({ routerUrl: router.url, port: 0, httpsPort: 0 });
    provider = recording(gw);
    controller = createIngressController({ store, provider, retryMs: 20, maxRetryMs: 100 });
    await controller.start();
  });
  after(async () => {
    await controller.stop();
    await router.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('exposes existing routes with an ingress as soon as it has started, and no others', async () => {
    assert.equal(await status('/early'), 200);
    assert.equal(await status('/plain'), 404);
  });

  it('follows creates, updates and deletes', async () => {
    const created = await store.create(route('later', { createingress: true, ingressconfig: { host: 'a.example.test' } }));
    await eventually(async () => (await status('/later', 'a.example.test')) === 200, 'new route exposed');
    assert.equal(await status('/later', 'b.example.test'), 404);
    await store.update({ ...created, spec: { ...created.spec, createingress: false } });
    await eventually(async () => (await status('/later', 'a.example.test')) === 404, 'exposure removed by --createingress=false');
    const plain = (await store.get('HTTPTrigger', 'default', 'plain'))!;
    await store.update({ ...plain, spec: { ...plain.spec, createingress: true } });
    await eventually(async () => (await status('/plain')) === 200, 'plain exposed');
    await store.delete('HTTPTrigger', 'default', 'plain');
    await eventually(async () => (await status('/plain')) === 404, 'exposure removed with the route');
  });

  it('applies a burst of changes in a few applies', async () => {
    await controller.idle();
    const before = provider.calls.length;
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.create(route(`burst-${i}`, { createingress: true }))));
    await eventually(async () => (await status('/burst-19')) === 200, 'burst applied');
    await controller.idle();
    assert.ok(provider.calls.length - before < 20, `${provider.calls.length - before} applies for 20 changes`);
  });

  it('serves HTTPS once the TLS secret appears, and picks up a renewed certificate', async () => {
    const first = makeSelfSignedCert(dir, 'secure.example.test');
    await store.create(route('secure', { createingress: true, ingressconfig: { host: 'secure.example.test', tls: 'secure-tls' } }));
    await eventually(async () => (await status('/secure', 'secure.example.test')) === 200, 'served over HTTP meanwhile');
    const get = (ca: string) =>
      new Promise<number>((resolve, reject) => {
        const u = new URL(gw.httpsUrl!);
        const req = https.get({ host: u.hostname, port: u.port, path: '/secure', servername: 'secure.example.test', headers: { host: 'secure.example.test' }, ca, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
      });
    await assert.rejects(get(first.cert));
    const s = await store.create(secret('secure-tls', { 'tls.crt': first.cert, 'tls.key': first.key }));
    await eventually(async () => (await get(first.cert)) === 200, 'HTTPS with the first certificate');
    fs.rmSync(path.join(dir, 'secure.example.test.crt'));
    const second = makeSelfSignedCert(dir, 'secure.example.test');
    await store.update({ ...s, data: { 'tls.crt': second.cert, 'tls.key': second.key } });
    await eventually(async () => (await get(second.cert)) === 200, 'HTTPS with the renewed certificate');
  });

  it('retries a failed apply until it succeeds', async () => {
    await controller.idle();
    provider.failNext(2);
    await store.create(route('retried', { createingress: true }));
    await eventually(async () => (await status('/retried')) === 200, 'applied after two failures');
  });
});
