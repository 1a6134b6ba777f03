// The contract every IngressProvider meets. A provider's test calls
// runIngressProviderContract with a factory; nothing here knows the provider.
// The contract starts a stand-in router (a real node:http server that echoes
// what it received) and asks the factory how a client's request would fare:
// local providers answer with real requests through their listeners, the
// kubernetes provider by resolving the Ingress objects it wrote.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { DEFAULT_BACKEND_BODY, INGRESS_NAMESPACE, type IngressProvider, type IngressSpec, type TlsMaterial } from './provider.ts';

export interface Received {
  method: string;
  /** Path and query as the router got them. */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Which of the stand-in router's connections carried the request, counting from 1. */
  connection?: number;
}

/** An Upgrade request as the router got it. */
export interface UpgradeReceived extends Omit<Received, 'body' | 'connection'> {
  /** The router's end of the connection. */
  socket: net.Socket;
  /** Settles once the router's end of the connection has closed. */
  closed: Promise<void>;
  /** Bytes that reached the router after the head of a refused upgrade. */
  after: Buffer[];
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
  /** Where a listening provider takes connections, for requests `send` cannot make (Upgrade). */
  listener?: () => { url: string; httpsUrl?: string };
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
  upgrades: UpgradeReceived[];
  close(): Promise<void>;
}

/** What the stand-in router answers an Upgrade whose path holds `/refuse`, and keeps the connection open after. */
export const UPGRADE_REFUSAL = 'HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 7\r\n\r\nrefused';

/** Asked for with `Sec-WebSocket-Protocol: frames`: the stand-in speaks just enough WebSocket for a real client. */
export const ECHO_FRAMES_PROTOCOL = 'frames';

function switchingProtocols(req: http.IncomingMessage): string {
  const lines = ['HTTP/1.1 101 Switching Protocols', 'Connection: Upgrade', `Upgrade: ${req.headers.upgrade}`];
  const key = req.headers['sec-websocket-key'];
  if (key) {
    const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    lines.push(`Sec-WebSocket-Accept: ${accept}`);
  }
  if (req.headers['sec-websocket-protocol'] === ECHO_FRAMES_PROTOCOL) lines.push(`Sec-WebSocket-Protocol: ${ECHO_FRAMES_PROTOCOL}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Echoes small WebSocket frames unmasked, as a server must send them, and answers a close. */
function echoFrames(socket: net.Socket, first: Buffer): void {
  let buf = first;
  const take = (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 2) {
      const opcode = buf[0] & 0x0f;
      const len = buf[1] & 0x7f;
      if (len > 125) throw new Error('the stand-in router echoes only small frames');
      if (buf.length < 6 + len) return;
      const mask = buf.subarray(2, 6);
      const payload = Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]));
      buf = buf.subarray(6 + len);
      if (opcode === 0x8) {
        socket.end(Buffer.from([0x88, 0]));
        return;
      }
      socket.write(Buffer.concat([Buffer.from([0x80 | opcode, len]), payload]));
    }
  };
  socket.on('data', take);
  take(Buffer.alloc(0));
}

/**
 * Stands in for the router: answers 200 with a JSON echo of the request. An
 * Upgrade gets 101 and then every byte echoed back (or WebSocket frames, see
 * ECHO_FRAMES_PROTOCOL), unless its path holds `/refuse` (UPGRADE_REFUSAL).
 */
export async function startEchoRouter(): Promise<EchoRouter> {
  const received: Received[] = [];
  const upgrades: UpgradeReceived[] = [];
  const connections = new WeakMap<net.Socket, number>();
  let count = 0;
  const server = http.createServer(async (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    for await (const c of req) body += c;
    const r: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, connection: connections.get(req.socket) ?? 0 };
    received.push(r);
    const text = JSON.stringify({ echo: r });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
  server.on('connection', (socket: net.Socket) => connections.set(socket, ++count));
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    const u: UpgradeReceived = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      socket,
      closed: once(socket, 'close').then(() => undefined),
      after: [],
    };
    upgrades.push(u);
    socket.on('error', () => socket.destroy());
    // The client's half-close ends the conversation, as a real server would take it.
    socket.on('end', () => socket.end());
    if (u.url.includes('/refuse')) {
      if (head.length > 0) u.after.push(head);
      socket.on('data', (d: Buffer) => u.after.push(d));
      socket.write(UPGRADE_REFUSAL);
      return;
    }
    socket.write(switchingProtocols(req));
    if (req.headers['sec-websocket-protocol'] === ECHO_FRAMES_PROTOCOL) {
      echoFrames(socket, head);
      return;
    }
    if (head.length > 0) socket.write(head);
    socket.on('data', (d: Buffer) => socket.write(d));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    upgrades,
    async close() {
      server.closeAllConnections();
      // Upgraded connections are no longer the HTTP server's to close.
      for (const u of upgrades) u.socket.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export interface UpgradeRequest {
  /** The provider's `http://` or `https://` URL. */
  url: string;
  /** Host header (and TLS server name). */
  host: string;
  path: string;
  ca?: string[];
  headers?: Record<string, string>;
  /** Sent right after the request head, in the same write. */
  extra?: string;
  /** The Upgrade header; default `websocket`. */
  protocol?: string;
}

export interface UpgradeClient {
  status: number;
  /** The answer as it arrived: head, then a body of Content-Length bytes for anything but a 101. */
  raw: string;
  body: string;
  socket: net.Socket;
  /** The next `n` bytes the tunnel brings back; rejects if the connection closes first. */
  read(n: number): Promise<Buffer>;
  /** Settles once the connection has closed. */
  closed: Promise<void>;
}

/** Sends an Upgrade request on a new connection and reads the answer's head (and body, if not a 101). */
export function sendUpgrade(req: UpgradeRequest): Promise<UpgradeClient> {
  const base = new URL(req.url);
  const socket =
    base.protocol === 'https:'
      ? tls.connect({ host: base.hostname, port: Number(base.port), servername: req.host.replace(/:\d+$/, ''), ca: req.ca })
      : net.connect({ host: base.hostname, port: Number(base.port) });
  const closed = once(socket, 'close').then(() => undefined);
  socket.on('error', () => {});
  const head = [`GET ${req.path} HTTP/1.1`, `Host: ${req.host}`, 'Connection: Upgrade', `Upgrade: ${req.protocol ?? 'websocket'}`];
  for (const [k, v] of Object.entries(req.headers ?? {})) head.push(`${k}: ${v}`);
  socket.write(`${head.join('\r\n')}\r\n\r\n${req.extra ?? ''}`);

  let buf = Buffer.alloc(0);
  let wake: (() => void) | undefined;
  socket.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    wake?.();
  });
  socket.on('close', () => wake?.());
  const until = async (enough: () => boolean, what: string) => {
    while (!enough()) {
      if (socket.destroyed) throw new Error(`the connection closed before ${what}; got ${JSON.stringify(buf.toString('latin1'))}`);
      await new Promise<void>((r) => {
        wake = r;
      });
    }
  };
  const read = async (n: number) => {
    await until(() => buf.length >= n, `${n} bytes came back`);
    const out = buf.subarray(0, n);
    buf = buf.subarray(n);
    return out;
  };
  return (async () => {
    await until(() => buf.includes('\r\n\r\n'), 'the answer head');
    const end = buf.indexOf('\r\n\r\n') + 4;
    const headText = (await read(end)).toString('latin1');
    const status = Number(headText.split(' ')[1]);
    const length = status === 101 ? 0 : Number(/\r\ncontent-length: *(\d+)/i.exec(headText)?.[1] ?? 0);
    const body = (await read(length)).toString('latin1');
    return { status, raw: headText + body, body, socket, read, closed };
  })();
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

    const upgrade = (o: Omit<UpgradeRequest, 'url'> & { https?: boolean }) => {
      const l = t.listener!();
      return sendUpgrade({ ...o, url: o.https ? l.httpsUrl! : l.url });
    };
    const lastUpgrade = (count: number) => {
      assert.equal(router.upgrades.length, count + 1, 'the upgrade reached the router once');
      return router.upgrades.at(-1)!;
    };
    const echoes = async (c: UpgradeClient) => {
      c.socket.write('ping');
      assert.equal((await c.read(4)).toString(), 'ping');
      // More than one socket buffer, so backpressure comes into play.
      const big = Buffer.alloc(1024 * 1024, 'flint');
      c.socket.write(big);
      assert.ok((await c.read(big.length)).equals(big), 'the large message came back unchanged');
    };

    it('forwards an Upgrade with the rewritten path and the forwarded headers, then relays bytes both ways', { timeout: 30_000 }, async (ctx) => {
      if (!t.listener) return ctx.skip('not applicable to this provider');
      await t.provider.apply([ingress('chat', { path: '/pub/*', prefix: '/api' })]);
      const count = router.upgrades.length;
      const c = await upgrade({
        host: 'h.example.test',
        path: '/pub/chat?room=1',
        headers: {
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
          'sec-websocket-version': '13',
          authorization: 'Bearer abc.def',
          'x-forwarded-for': '203.0.113.9',
          'x-forwarded-host': 'spoofed.example.test',
          'x-forwarded-proto': 'https',
        },
      });
      try {
        assert.equal(c.status, 101, c.raw);
        const r = lastUpgrade(count);
        assert.equal(r.method, 'GET');
        assert.equal(r.url, '/api/chat?room=1');
        assert.equal(r.headers.host, 'h.example.test');
        assert.equal(r.headers['x-forwarded-host'], 'h.example.test');
        assert.equal(r.headers['x-forwarded-proto'], 'http');
        assert.equal(r.headers['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
        assert.equal(r.headers.upgrade, 'websocket');
        assert.match(String(r.headers.connection), /^upgrade$/i);
        assert.equal(r.headers['sec-websocket-key'], 'dGhlIHNhbXBsZSBub25jZQ==');
        assert.equal(r.headers.authorization, 'Bearer abc.def');
        await echoes(c);
      } finally {
        c.socket.destroy();
      }
    });

    it('forwards an Upgrade over HTTPS', { timeout: 30_000 }, async (ctx) => {
      if (!t.listener || !t.capabilities.https) return ctx.skip('not applicable to this provider');
      await t.provider.apply([
        ingress('secure', { host: 'secure.example.test', tls: { secretName: 'secure-tls', hosts: ['secure.example.test'], material: secure } }),
      ]);
      const count = router.upgrades.length;
      const c = await upgrade({ host: 'secure.example.test', path: '/secure', https: true, ca: [secure.cert] });
      try {
        assert.equal(c.status, 101, c.raw);
        const r = lastUpgrade(count);
        assert.equal(r.url, '/secure');
        assert.equal(r.headers.host, 'secure.example.test');
        assert.equal(r.headers['x-forwarded-proto'], 'https');
        await echoes(c);
      } finally {
        c.socket.destroy();
      }
    });

    it('passes back an answer other than 101, and answers 404 to an Upgrade no ingress claims', { timeout: 30_000 }, async (ctx) => {
      if (!t.listener) return ctx.skip('not applicable to this provider');
      await t.provider.apply([ingress('refuse')]);
      const refused = await upgrade({ host: 'h.test', path: '/refuse' });
      refused.socket.destroy();
      assert.equal(refused.status, 403, refused.raw);
      assert.equal(refused.body, 'refused');
      const count = router.upgrades.length;
      const none = await upgrade({ host: 'h.test', path: '/nothing' });
      none.socket.destroy();
      assert.equal(none.status, 404, none.raw);
      assert.equal(none.body, DEFAULT_BACKEND_BODY);
      assert.equal(router.upgrades.length, count, 'the router never saw it');
    });

    it("carries a conversation of Node's WebSocket client", { timeout: 30_000 }, async (ctx) => {
      if (!t.listener) return ctx.skip('not applicable to this provider');
      await t.provider.apply([ingress('ws')]);
      const ws = new WebSocket(`${t.listener().url.replace(/^http/, 'ws')}/ws`, ECHO_FRAMES_PROTOCOL);
      try {
        await new Promise((resolve, reject) => {
          ws.onopen = resolve;
          ws.onerror = () => reject(new Error('the WebSocket did not open'));
        });
        assert.equal(ws.protocol, ECHO_FRAMES_PROTOCOL);
        const echoed = new Promise<string>((resolve, reject) => {
          ws.onmessage = (e) => resolve(String(e.data));
          ws.onclose = () => reject(new Error('the WebSocket closed before the echo'));
        });
        ws.send('hello through the ingress');
        assert.equal(await echoed, 'hello through the ingress');
      } finally {
        ws.close();
      }
    });

    it('keeps connections to the router open between plain requests', async (ctx) => {
      if (!t.capabilities.traffic) return ctx.skip('not applicable to this provider');
      await t.provider.apply([ingress('again')]);
      const seen = new Set<number | undefined>();
      for (let i = 0; i < 4; i++) seen.add((await exposed('h.test', '/again')).connection);
      assert.ok(seen.size < 4, `every request opened a new connection to the router (${[...seen].join(', ')})`);
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

    // Last, since it stops the provider (and starts it again for the teardown).
    it('keeps upgraded connections open while what is behind it stops, then cuts the rest', { timeout: 30_000 }, async () => {
      let ran = 0;
      if (!t.listener) {
        await t.provider.stop(async () => {
          ran++;
        });
        assert.equal(ran, 1, 'whileTunnelsOpen ran once');
        await t.provider.start();
        return;
      }
      await t.provider.apply([ingress('bye')]);
      const count = router.upgrades.length;
      const leaving = await upgrade({ host: 'h.test', path: '/bye' });
      const staying = await upgrade({ host: 'h.test', path: '/bye' });
      assert.deepEqual([leaving.status, staying.status], [101, 101], leaving.raw + staying.raw);
      assert.equal(router.upgrades.length, count + 2);
      // The stand-ins' order at the router is the order the clients connected only by luck: tell them apart by a byte.
      leaving.socket.write('L');
      staying.socket.write('S');
      assert.equal((await leaving.read(1)).toString(), 'L');
      assert.equal((await staying.read(1)).toString(), 'S');
      const behind = router.upgrades.slice(count);
      await t.provider.stop(async () => {
        ran++;
        // What is behind a tunnel says goodbye and closes, as a function's WebSocket does when its instance stops.
        for (const u of behind) u.socket.write('bye');
        assert.equal((await leaving.read(3)).toString(), 'bye');
        assert.equal((await staying.read(3)).toString(), 'bye');
        leaving.socket.end();
        await leaving.closed;
        assert.equal(staying.socket.destroyed, false, 'a tunnel stays open until whileTunnelsOpen has finished');
      });
      assert.equal(ran, 1, 'whileTunnelsOpen ran once');
      await staying.closed;
      await t.provider.start();
    });
  });
}
