// The contract every IngressProvider meets. A provider's test calls
// runIngressProviderContract with a factory; nothing here knows the provider.
// The contract starts a stand-in router (a real node:http server that echoes
// what it received) and asks the factory how a client's request would fare:
// local providers answer with real requests through their listeners, the
// kubernetes provider by resolving the Ingress objects it wrote.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { DEFAULT_BACKEND_BODY, INGRESS_NAMESPACE, type IngressProvider, type IngressSpec, type TlsMaterial } from './provider.ts';

export interface Received {
  method: string;
  /** Path and query as the router got them. */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export type Outcome =
  | { kind: 'router'; status: number; received: Received }
  | { kind: 'default'; status: number }
  | { kind: 'other'; status: number; body: string };

export interface SendRequest {
  /** Host header (and TLS server name). */
  host: string;
  /** Path and query. */
  path: string;
  https?: boolean;
  /** Certificates to trust for HTTPS. */
  ca?: string[];
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface ContractTarget {
  provider: IngressProvider;
  send(req: SendRequest): Promise<Outcome>;
  capabilities: {
    /** Real requests go through the provider (headers, load, status codes can be checked). */
    traffic: boolean;
    https: boolean;
    /** A differing ingress path is rewritten to the route's url. */
    rewrite: boolean;
    /**
     * Paths match exactly as Flint defines them (exact unless '/*' or a route
     * prefix). False for Kubernetes, where the ingress controller decides
     * what an ImplementationSpecific path means (ingress-nginx: a plain prefix).
     */
    strictPaths: boolean;
  };
}

export interface ContractEnv {
  routerUrl: string;
  /** A fresh directory, removed after the suite. */
  tmpDir: string;
}

export interface ContractFactory {
  /** Creates and starts a provider in front of `routerUrl`. */
  setup(env: ContractEnv): Promise<ContractTarget>;
  teardown(): Promise<void>;
}

/** A desired ingress for a route `name` in `default`, any host, path = route url unless given. */
export function ingress(name: string, o: Partial<IngressSpec> & { url?: string; prefix?: string } = {}): IngressSpec {
  const target = o.target ?? (o.prefix ? { path: o.prefix, prefix: true } : { path: o.url ?? `/${name}`, prefix: false });
  return {
    name,
    namespace: INGRESS_NAMESPACE,
    labels: { functionName: `${name}-fn`, triggerName: name, triggerNamespace: 'default' },
    annotations: o.annotations ?? {},
    host: o.host ?? '',
    path: o.path ?? target.path,
    routePrefix: o.routePrefix ?? (o.path === undefined && target.prefix),
    target,
    ...(o.tls ? { tls: o.tls } : {}),
  };
}

/** A self-signed certificate for `host` (and its wildcard), made with the openssl CLI. */
export function makeSelfSignedCert(dir: string, host: string): TlsMaterial {
  const key = path.join(dir, `${host}.key`);
  const crt = path.join(dir, `${host}.crt`);
  const r = spawnSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', crt, '-days', '2', '-subj', `/CN=${host}`, '-addext', `subjectAltName=DNS:${host}`],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
  return { cert: fs.readFileSync(crt, 'utf8'), key: fs.readFileSync(key, 'utf8') };
}

export interface EchoRouter {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

/** Stands in for the router: answers 200 with a JSON echo of the request. */
export async function startEchoRouter(): Promise<EchoRouter> {
  const received: Received[] = [];
  const server = http.createServer(async (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    for await (const c of req) body += c;
    const r: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
    received.push(r);
    const text = JSON.stringify({ echo: r });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** `send` for providers that listen: real requests to their HTTP and HTTPS URLs. */
export function httpSender(urls: () => { url: string; httpsUrl?: string }): (req: SendRequest) => Promise<Outcome> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const once = (req: SendRequest, fresh: boolean) =>
    new Promise<Outcome>((resolve, reject) => {
      const base = new URL(req.https ? urls().httpsUrl! : urls().url);
      const headers: Record<string, string> = { host: req.host, ...(req.headers ?? {}) };
      if (req.body !== undefined) headers['content-length'] = String(Buffer.byteLength(req.body));
      const common = { hostname: base.hostname, port: base.port, path: req.path, method: req.method ?? 'GET', headers };
      const onResponse = (res: http.IncomingMessage) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status === 404 && body === DEFAULT_BACKEND_BODY) return resolve({ kind: 'default', status });
          if (status === 200 && body.startsWith('{"echo"')) return resolve({ kind: 'router', status, received: JSON.parse(body).echo });
          resolve({ kind: 'other', status, body });
        });
        res.on('error', reject);
      };
      const r = req.https
        ? https.request({ ...common, servername: req.host.replace(/:\d+$/, ''), ca: req.ca, agent: false }, onResponse)
        : http.request({ ...common, agent: fresh ? false : agent }, onResponse);
      r.on('error', (err: NodeJS.ErrnoException) => {
        // The server may close an idle keep-alive connection just as a request
        // goes out on it (nginx does on reload); like browsers and curl, send
        // it again once on a new connection. Node's docs recommend this check.
        if (r.reusedSocket && !fresh && (err.code === 'ECONNRESET' || err.message === 'socket hang up')) resolve(once(req, true));
        else reject(err);
      });
      r.end(req.body);
    });
  return (req) => once(req, false);
}

export function runIngressProviderContract(name: string, factory: ContractFactory): void {
  describe(`ingress provider contract: ${name}`, () => {
    let tmpDir: string;
    let router: EchoRouter;
    let t: ContractTarget;
    let secure: TlsMaterial;

    before(async () => {
      tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ingress-'));
      router = await startEchoRouter();
      secure = makeSelfSignedCert(tmpDir, 'secure.example.test');
      t = await factory.setup({ routerUrl: router.url, tmpDir });
    });
    after(async () => {
      await factory.teardown();
      await router?.close();
      fs.rmSync(tmpDir, { recursive: true, force: true });
    });
    afterEach(async () => {
      await t.provider.apply([]);
    });

    const exposed = async (host: string, p: string, extra: Partial<SendRequest> = {}) => {
      const o = await t.send({ host, path: p, ...extra });
      assert.equal(o.kind, 'router', `${host}${p} should reach the router, got ${JSON.stringify(o)}`);
      return (o as Extract<Outcome, { kind: 'router' }>).received;
    };
    const hidden = async (host: string, p: string, extra: Partial<SendRequest> = {}) => {
      const o = await t.send({ host, path: p, ...extra });
      assert.equal(o.kind, 'default', `${host}${p} should get the default backend, got ${JSON.stringify(o)}`);
      if (t.capabilities.traffic) assert.equal(o.status, 404);
    };

    it('answers everything with the default backend when no route has an ingress', async () => {
      await hidden('anything.test', '/hello');
      await t.provider.apply([]);
      await hidden('anything.test', '/hello');
      await hidden('anything.test', '/');
    });

    it('forwards an any-host ingress with Host, X-Forwarded-Host and Authorization', async () => {
      await t.provider.apply([ingress('hello')]);
      const r = await exposed('whatever.example.test', '/hello?x=1', { headers: { authorization: 'Bearer abc.def' } });
      assert.equal(r.url, '/hello?x=1');
      if (t.capabilities.traffic) {
        assert.equal(r.headers.host, 'whatever.example.test');
        assert.equal(r.headers['x-forwarded-host'], 'whatever.example.test');
        assert.equal(r.headers.authorization, 'Bearer abc.def', 'the router enforces auth, so the token must pass untouched');
        assert.equal(r.headers['x-forwarded-proto'], 'http');
      }
      if (t.capabilities.strictPaths) await hidden('whatever.example.test', '/hello/more');
      await hidden('whatever.example.test', '/other');
    });

    it('streams request bodies and keeps methods', async (ctx) => {
      if (!t.capabilities.traffic) return ctx.skip('not applicable to this provider');
      await t.provider.apply([ingress('upload')]);
      const body = 'x'.repeat(200_000);
      const r = await exposed('a.test', '/upload', { method: 'POST', body, headers: { 'content-type': 'text/plain' } });
      assert.equal(r.method, 'POST');
      assert.equal(r.body.length, body.length);
    });

    it('selects by host, including wildcard hosts and a Host with a port', async () => {
      await t.provider.apply([ingress('a', { host: 'a.example.test', path: '/h', url: '/h' }), ingress('w', { host: '*.wild.example.test', url: '/w' })]);
      await exposed('a.example.test', '/h');
      await exposed('a.example.test:8081', '/h');
      await hidden('b.example.test', '/h');
      await exposed('x.wild.example.test', '/w');
      await hidden('wild.example.test', '/w');
      await hidden('a.example.test', '/w');
    });

    it("matches '/*' paths and route prefixes like the router", async () => {
      await t.provider.apply([ingress('p', { path: '/api/*', prefix: '/api' }), ingress('q', { prefix: '/pre/' })]);
      assert.equal((await exposed('h.test', '/api')).url, '/api');
      assert.equal((await exposed('h.test', '/api/x/y?z=1')).url, '/api/x/y?z=1');
      if (t.capabilities.strictPaths) await hidden('h.test', '/apix');
      assert.equal((await exposed('h.test', '/pre/a')).url, '/pre/a');
      if (t.capabilities.strictPaths) await hidden('h.test', '/pre');
    });

    it("rewrites a differing ingress path to the route's url", async (ctx) => {
      if (!t.capabilities.rewrite) return ctx.skip('not applicable to this provider');
      await t.provider.apply([ingress('r', { path: '/public/hello', url: '/hello' }), ingress('s', { path: '/pub/*', prefix: '/api' })]);
      assert.equal((await exposed('h.test', '/public/hello?q=1')).url, '/hello?q=1');
      assert.equal((await exposed('h.test', '/pub/a/b?z=2')).url, '/api/a/b?z=2');
      assert.equal((await exposed('h.test', '/pub')).url, '/api');
      await hidden('h.test', '/hello');
    });

    it('follows updates and removals, and takes the same set twice', async () => {
      await t.provider.apply([ingress('one')]);
      await exposed('h.test', '/one');
      await t.provider.apply([ingress('one')]);
      await exposed('h.test', '/one');
      await t.provider.apply([ingress('two')]);
      await hidden('h.test', '/one');
      await exposed('h.test', '/two');
      await t.provider.apply([ingress('two', { path: '/moved', url: '/two' })]);
      await hidden('h.test', '/two');
      await exposed('h.test', '/moved');
      await t.provider.apply([]);
      await hidden('h.test', '/moved');
    });

    it('skips an ingress it cannot serve and still serves the others', async () => {
      const bad = ingress('bad', { path: 'no-slash' });
      const result = await t.provider.apply([bad, ingress('good')]);
      assert.ok(result.skipped.some((s) => s.name === 'bad'), `bad should be skipped: ${JSON.stringify(result)}`);
      await exposed('h.test', '/good');
    });

    it("serves HTTPS with the route's certificate", async (ctx) => {
      if (!t.capabilities.https) return ctx.skip('not applicable to this provider');
      await t.provider.apply([
        ingress('secure', { host: 'secure.example.test', tls: { secretName: 'secure-tls', hosts: ['secure.example.test'], material: secure } }),
      ]);
      const r = await exposed('secure.example.test', '/secure', { https: true, ca: [secure.cert] });
      assert.equal(r.headers['x-forwarded-proto'], 'https');
      await exposed('secure.example.test', '/secure');
      await t.provider.apply([]);
      const gone = await t.send({ host: 'secure.example.test', path: '/secure', https: true, ca: [secure.cert] }).catch((err: Error) => err);
      assert.ok(gone instanceof Error || gone.kind === 'default', `no longer exposed over HTTPS: ${JSON.stringify(gone)}`);
    });

    it('acts on the ssl-redirect and proxy-body-size annotations', async (ctx) => {
      if (!t.capabilities.traffic || !t.capabilities.https) return ctx.skip('not applicable to this provider');
      const tls = { secretName: 'secure-tls', hosts: ['secure.example.test'], material: secure };
      await t.provider.apply([
        ingress('redir', { host: 'secure.example.test', tls, annotations: { 'nginx.ingress.kubernetes.io/ssl-redirect': 'true' } }),
        ingress('small', { annotations: { 'nginx.ingress.kubernetes.io/proxy-body-size': '1k' } }),
      ]);
      const r = await t.send({ host: 'secure.example.test', path: '/redir?a=1' });
      assert.equal(r.status, 308);
      await exposed('secure.example.test', '/redir', { https: true, ca: [secure.cert] });
      await exposed('h.test', '/small', { method: 'POST', body: 'x'.repeat(1000) });
      const big = await t.send({ host: 'h.test', path: '/small', method: 'POST', body: 'x'.repeat(5000) });
      assert.equal(big.status, 413);
    });

    it('drops no request while the ingresses change', async (ctx) => {
      if (!t.capabilities.traffic) return ctx.skip('not applicable to this provider');
      await t.provider.apply([ingress('steady')]);
      let stop = false;
      const outcomes: string[] = [];
      const worker = async () => {
        while (!stop) {
          try {
            const o = await t.send({ host: 'h.test', path: '/steady' });
            outcomes.push(o.kind === 'router' ? 'ok' : `${o.kind} ${o.status}`);
          } catch (err) {
            outcomes.push(`error ${(err as Error).message}`);
          }
        }
      };
      const workers = Array.from({ length: 6 }, worker);
      const deadline = Date.now() + 20_000;
      const progress = async (n: number) => {
        while (outcomes.length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      };
      for (let i = 0; i < 8; i++) {
        // Requests must be running before, during and after every change.
        await progress(outcomes.length + 5);
        const others = Array.from({ length: i % 3 }, (_, j) => ingress(`other-${i}-${j}`));
        await t.provider.apply([ingress('steady'), ...others]);
      }
      await progress(outcomes.length + 5);
      stop = true;
      await Promise.all(workers);
      const failed = outcomes.filter((o) => o !== 'ok');
      assert.ok(outcomes.length >= 50, `only ${outcomes.length} requests ran`);
      assert.deepEqual(failed, [], `${failed.length} of ${outcomes.length} requests failed`);
    });
  });
}
