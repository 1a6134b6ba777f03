import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { FlintError } from '../api/errors.ts';
import type { AnyResource } from '../api/kinds.ts';
import { openSqliteStore, type SqliteStore } from '../store/sqlite.ts';
import { createRouter, type Router } from './router.ts';
import { eventually } from '../testing/eventually.ts';
import { call, upgradeCall } from './testing/client.ts';
import type { Echo, EchoWorker } from './testing/echo-worker.ts';
import { startEchoWorker } from './testing/echo-worker.ts';
import { FakeExecutor, type Placement } from './testing/fake-executor.ts';
import { TokenScope } from '../auth/scope.ts';
import { fnObj, type RouteSpec, routeObj } from './testing/fixtures.ts';

const logger = pino({ level: 'silent' });

let dir: string;
let store: SqliteStore;
let workerA: EchoWorker;
let workerB: EchoWorker;
let executor: FakeExecutor;
let router: Router;
let url: string;

async function put(...objs: AnyResource[]): Promise<void> {
  for (const o of objs) {
    // The store sets server-side metadata itself.
    const { name, namespace } = o.metadata;
    await store.create({ ...o, metadata: { name, namespace } } as AnyResource);
  }
}

const fn = (name: string, opts?: Parameters<typeof fnObj>[1]) => fnObj(name, opts);
const route = (name: string, spec: RouteSpec, namespace?: string) => routeObj(name, spec, { namespace });

const get = (p: string, opts?: Parameters<typeof call>[2]) => call(url, p, opts);

/** The request as the worker saw it; asserts a 200 from the worker. */
async function echo(p: string, opts?: Parameters<typeof call>[2]): Promise<Echo> {
  const r = await get(p, opts);
  assert.equal(r.status, 200, `${p}: ${r.text()}`);
  return r.json();
}

async function waitStatus(p: string, status: number, opts?: Parameters<typeof call>[2]): Promise<void> {
  await eventually(async () => (await get(p, opts)).status === status, `${p} -> ${status}`);
}

function assertJsonError(r: Awaited<ReturnType<typeof get>>, status: number, code: string): void {
  assert.equal(r.status, status, r.text());
  assert.match(String(r.headers['content-type']), /^application\/json/);
  const body = r.json();
  assert.equal(body.code, code);
  assert.equal(typeof body.message, 'string');
  assert.equal(body.requestId, r.headers['x-flint-request-id']);
}

/** A worker process killed with SIGKILL leaves its socket file behind: connecting gives ECONNREFUSED. */
async function deadSocket(): Promise<string> {
  const p = path.join(dir, 'dead.sock');
  const child = spawn(process.execPath, ['-e', `require('node:net').createServer().listen(${JSON.stringify(p)}, () => console.log('up'))`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await once(child.stdout!, 'data');
  child.kill('SIGKILL');
  await once(child, 'exit');
  assert.ok(fs.existsSync(p));
  return p;
}

/**
 * An instance whose accept queue holds one connection (backlog 1): a Unix socket refuses a connect outright once its
 * queue is full, where TCP would resend the SYN. Routed at /<name>; `leases` lists its release outcomes so far.
 */
async function crowdedInstance(name: string): Promise<{ child: ReturnType<typeof spawn>; leases: () => string[] }> {
  const sock = path.join(dir, `${name}.sock`);
  const child = spawn(
    process.execPath,
    ['-e', `require('node:http').createServer((q, r) => r.end('ok')).listen({ path: ${JSON.stringify(sock)}, backlog: 1 }, () => console.log('up'))`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await once(child.stdout!, 'data');
  executor.placements.set(`default/${name}`, { socketPath: sock });
  await put(fn(name), route(`r-${name}`, { relativeurl: `/${name}`, fn: name }));
  await waitStatus(`/${name}`, 200);
  return { child, leases: () => executor.releases.filter((x) => x.fn === `default/${name}`).map((x) => x.outcome) };
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-router-'));
  store = openSqliteStore(path.join(dir, 'flint.db'));
  workerA = await startEchoWorker(dir, 'a');
  workerB = await startEchoWorker(dir, 'b');
  executor = new FakeExecutor({ socketPath: workerA.socketPath });
  executor.placements.set('default/fb', { socketPath: workerB.socketPath });
  executor.placements.set('default/dead', { socketPath: await deadSocket() });
  executor.placements.set('default/vanished', { socketPath: path.join(dir, 'never-there.sock') });
  executor.placements.set('default/revived', { socketPath: path.join(dir, 'never-there.sock') });
  executor.placements.set('default/busy', { error: new FlintError('FLINT_ERR_TOO_MANY_REQUESTS', 'all instances busy') });
  executor.placements.set('default/broken', { error: new FlintError('FLINT_ERR_SPECIALIZE_FAILED', 'SyntaxError in handler') });
  executor.placements.set('default/nopkg', { error: new FlintError('FLINT_ERR_NOT_FOUND', "package 'x' not found") });
  executor.placements.set('default/stuck', { hang: true });
  await put(
    fn('hello'),
    fn('fb'),
    fn('dead'),
    fn('vanished'),
    fn('revived'),
    fn('busy'),
    fn('broken'),
    fn('nopkg'),
    fn('stuck'),
    fn('quick', { spec: { functionTimeout: 1 } }),
    fn('streamy', { spec: { functionTimeout: 1, streaming: { idleTimeoutSeconds: 2, maxDurationSeconds: 3 } } }),
    fn('wsonly', { spec: { functionTimeout: 1, streaming: { protocol: 'websocket', idleTimeoutSeconds: 1 } } }),
    fn('sseonly', { spec: { functionTimeout: 2, streaming: { protocol: 'sse', idleTimeoutSeconds: 1 } } }),
    fn('b', { namespace: 'a' }),
    fn('fx', { namespace: 'ns1' }),
    fn('a'),
    route('exact', { relativeurl: '/hello' }),
    route('api', { prefix: '/api' }),
    route('docs', { prefix: '/docs/' }),
    route('keep', { prefix: '/keep', keepPrefix: true }),
    route('params', { relativeurl: '/users/{userId}/files/{path:.+}' }),
    route('regex', { relativeurl: '/n/{num:[0-9]+}' }),
    route('methods', { relativeurl: '/m', methods: ['POST', 'PUT'], method: 'DELETE' }),
    route('hosted', { relativeurl: '/where', host: 'api.example.com', fn: 'fb' }),
    route('hostless', { relativeurl: '/where' }),
    route('pshort', { prefix: '/p' }),
    route('plong', { prefix: '/p/deep/', fn: 'fb' }),
    route('ghost', { relativeurl: '/ghost', fn: 'nobody' }),
    route('r-dead', { relativeurl: '/dead', fn: 'dead' }),
    route('r-vanished', { relativeurl: '/vanished', fn: 'vanished' }),
    route('r-revived', { prefix: '/revived', fn: 'revived', methods: ['GET', 'POST'] }),
    route('r-busy', { relativeurl: '/busy', fn: 'busy' }),
    route('r-broken', { relativeurl: '/broken', fn: 'broken' }),
    route('r-nopkg', { relativeurl: '/nopkg', fn: 'nopkg' }),
    route('r-stuck', { relativeurl: '/stuck', fn: 'stuck' }),
    route('r-quick', { prefix: '/quick', fn: 'quick' }),
    route('r-streamy', { prefix: '/streamy', fn: 'streamy' }),
    route('r-wsonly', { prefix: '/wsonly', fn: 'wsonly' }),
    route('r-sseonly', { prefix: '/sseonly', fn: 'sseonly' }),
    route('canary', { relativeurl: '/canary', functionref: { type: 'function-weights', functionweights: { hello: 50, fb: 50 } } }),
  );
  router = createRouter({ store, executor, logger, host: '127.0.0.1', port: 0 });
  url = (await router.start()).url;
});

after(async () => {
  await router?.stop();
  await workerA?.close();
  await workerB?.close();
  await store?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('router', () => {
  it('answers /router-healthz with 200 and a request id', async () => {
    const r = await get('/router-healthz');
    assert.equal(r.status, 200);
    assert.ok(r.headers['x-flint-request-id']);
  });

  it('answers GET and HEAD / with 200 and an empty body, which ingress controllers probe; other methods there get 404', async () => {
    for (const method of ['GET', 'HEAD']) {
      const r = await get('/', { method });
      assert.equal(r.status, 200, method);
      assert.equal(r.body.length, 0);
      assert.equal(r.headers['content-length'], '0');
      assert.ok(r.headers['x-flint-request-id']);
    }
    assert.equal((await get('/', { method: 'POST', body: 'x' })).status, 404);
    assert.equal((await get('/?probe=1')).status, 200);
  });

  it('forwards an exact route with the original path and query, and adds the Flint headers', async () => {
    const r = await get('/hello?x=1&y=2', { headers: { Host: 'example.test:9000', 'X-Custom': 'kept' } });
    assert.equal(r.status, 200);
    const e: Echo = r.json();
    assert.equal(e.url, '/hello?x=1&y=2');
    const h = e.headers;
    const stored = await store.get('Function', 'default', 'hello');
    assert.equal(h['x-flint-function-name'], 'hello');
    assert.equal(h['x-flint-function-namespace'], 'default');
    assert.equal(h['x-flint-function-uid'], stored?.metadata.uid);
    assert.equal(h['x-flint-function-resourceversion'], stored?.metadata.resourceVersion);
    assert.equal(h['x-flint-full-url'], '/hello?x=1&y=2');
    assert.equal(h['x-forwarded-host'], 'example.test:9000');
    assert.equal(h.forwarded, 'host="example.test:9000"');
    assert.equal(h['x-forwarded-for'], '127.0.0.1');
    assert.equal(h['x-custom'], 'kept');
    assert.equal(h['x-flint-request-id'], r.headers['x-flint-request-id']);
    // The router's id wins over the function's; repeated headers survive.
    assert.notEqual(r.headers['x-flint-request-id'], 'forged-by-function');
    assert.deepEqual(r.headers['set-cookie'], ['a=1', 'b=2']);
  });

  it('keeps forwarding headers the client already set, appending to X-Forwarded-For', async () => {
    const e = await echo('/hello', { headers: { 'X-Forwarded-Host': 'outer.test', 'X-Forwarded-For': '10.0.0.1' } });
    assert.equal(e.headers['x-forwarded-host'], 'outer.test');
    assert.equal(e.headers.forwarded, undefined);
    assert.equal(e.headers['x-forwarded-for'], '10.0.0.1, 127.0.0.1');
  });

  it('strips hop-by-hop headers and headers a client must not forge', async () => {
    const e = await echo('/hello', {
      headers: {
        Connection: 'keep-alive, X-Hop-Secret',
        'X-Hop-Secret': 'no',
        'Keep-Alive': 'timeout=5',
        'Proxy-Authorization': 'Basic eA==',
        TE: 'trailers',
        'X-Flint-Params-Admin': 'true',
        'X-Flint-Function-Name': 'forged',
        'X-Flint-Full-Url': '/forged',
      },
    });
    for (const h of ['x-hop-secret', 'keep-alive', 'proxy-authorization', 'te', 'x-flint-params-admin']) assert.equal(e.headers[h], undefined, h);
    assert.equal(e.headers['x-flint-function-name'], 'hello');
    assert.equal(e.headers['x-flint-full-url'], '/hello');
  });

  it("reuses a sane client request id and replaces one that is not", async () => {
    const r = await get('/hello', { headers: { 'X-Flint-Request-Id': 'client-id-42' } });
    assert.equal(r.headers['x-flint-request-id'], 'client-id-42');
    assert.equal(r.json().headers['x-flint-request-id'], 'client-id-42');
    const bad = await get('/hello', { headers: { 'X-Flint-Request-Id': 'has space' } });
    assert.notEqual(bad.headers['x-flint-request-id'], 'has space');
    assert.equal(bad.json().headers['x-flint-request-id'], bad.headers['x-flint-request-id']);
    const a = await get('/nowhere');
    const b = await get('/nowhere');
    assert.notEqual(a.headers['x-flint-request-id'], b.headers['x-flint-request-id']);
  });

  it('strips a prefix without a trailing slash, and matches the bare prefix but not a longer word', async () => {
    assert.equal((await echo('/api')).url, '/');
    assert.equal((await echo('/api?q=1')).url, '/?q=1');
    assert.equal((await echo('/api/')).url, '/');
    assert.equal((await echo('/api/users/7?q=1')).url, '/users/7?q=1');
    assertJsonError(await get('/apifoo'), 404, 'FLINT_ERR_NOT_FOUND');
  });

  it('treats a prefix with a trailing slash as the subtree only', async () => {
    assertJsonError(await get('/docs'), 404, 'FLINT_ERR_NOT_FOUND');
    assert.equal((await echo('/docs/')).url, '/');
    assert.equal((await echo('/docs/a/b')).url, '/a/b');
  });

  it('keeps the prefix with keepPrefix', async () => {
    assert.equal((await echo('/keep/x?y=1')).url, '/keep/x?y=1');
    assert.equal((await echo('/keep')).url, '/keep');
  });

  it('passes path parameters as X-Flint-Params headers, a regex one spanning slashes', async () => {
    const e = await echo('/users/u%2042/files/a/b%20c.txt');
    assert.equal(e.headers['x-flint-params-userid'], 'u 42');
    assert.equal(e.headers['x-flint-params-path'], 'a/b c.txt');
    assert.equal(e.url, '/users/u%2042/files/a/b%20c.txt');
    assert.equal((await echo('/n/123')).headers['x-flint-params-num'], '123');
    assertJsonError(await get('/n/12x'), 404, 'FLINT_ERR_NOT_FOUND');
  });

  it('routes only the declared methods and answers others with 405 and Allow', async () => {
    for (const method of ['POST', 'PUT', 'DELETE']) assert.equal((await echo('/m', { method })).method, method);
    const r = await get('/m');
    assertJsonError(r, 405, 'FLINT_ERR_METHOD_NOT_ALLOWED');
    assert.equal(r.headers.allow, 'POST, PUT, DELETE');
  });

  it('matches a route with a host only on that Host header, and ranks it first', async () => {
    assert.equal((await echo('/where', { headers: { Host: 'api.example.com' } })).instance, 'b');
    assert.equal((await echo('/where', { headers: { Host: 'other.example.com' } })).instance, 'a');
  });

  it('takes an absolute-form target\'s authority over Host (RFC 9112 3.2.2), for matching and for X-Forwarded-Host', async () => {
    const target = new URL(url);
    const ask = async (requestTarget: string, host: string) => {
      const sock = net.connect(Number(target.port), target.hostname);
      await once(sock, 'connect');
      const chunks: Buffer[] = [];
      sock.on('data', (c) => chunks.push(c));
      sock.write(`GET ${requestTarget} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      await once(sock, 'close');
      const text = Buffer.concat(chunks).toString('latin1');
      assert.match(text, /^HTTP\/1\.1 200 /, text.slice(0, 200));
      // The echo body is chunked: its one chunk holds the JSON.
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      return JSON.parse(body.slice(body.indexOf('\r\n') + 2, body.lastIndexOf('}') + 1)) as Echo;
    };
    const viaAuthority = await ask('http://api.example.com/where?q=1', 'other.example.com');
    assert.equal(viaAuthority.instance, 'b');
    assert.equal(viaAuthority.headers['x-forwarded-host'], 'api.example.com');
    assert.equal(viaAuthority.url, '/where?q=1');
    assert.equal((await ask('http://other.example.com/where', 'api.example.com')).instance, 'a');
  });

  it('ranks longer prefixes first', async () => {
    const deep = await echo('/p/deep/x');
    assert.equal(deep.instance, 'b');
    assert.equal(deep.url, '/x');
    const shallow = await echo('/p/other');
    assert.equal(shallow.instance, 'a');
    assert.equal(shallow.url, '/other');
  });

  it('answers an unknown path with a JSON 404', async () => {
    assertJsonError(await get('/no/such/route'), 404, 'FLINT_ERR_NOT_FOUND');
  });

  it('skips a route whose function does not exist, and serves it once the function appears', async () => {
    assertJsonError(await get('/ghost'), 404, 'FLINT_ERR_NOT_FOUND');
    assertJsonError(await get('/flint-function/nobody'), 404, 'FLINT_ERR_NOT_FOUND');
    await put(fn('nobody'));
    await waitStatus('/ghost', 200);
    await waitStatus('/flint-function/nobody', 200);
  });

  it('serves the internal function path for any method, with and without a namespace', async () => {
    assert.equal((await echo('/flint-function/hello')).url, '/');
    const sub = await echo('/flint-function/hello/sub/x?y=1', { method: 'DELETE' });
    assert.equal(sub.url, '/sub/x?y=1');
    assert.equal(sub.method, 'DELETE');
    assert.equal(sub.headers['x-flint-full-url'], '/flint-function/hello/sub/x?y=1');
    const ns = await echo('/flint-function/ns1/fx/deep', { method: 'POST', body: 'x' });
    assert.equal(ns.headers['x-flint-function-namespace'], 'ns1');
    assert.equal(ns.url, '/deep');
  });

  it('prefers namespace/function for /flint-function/a/b, else function a with sub-path /b', async () => {
    const both = await echo('/flint-function/a/b');
    assert.equal(both.headers['x-flint-function-namespace'], 'a');
    assert.equal(both.headers['x-flint-function-name'], 'b');
    const sub = await echo('/flint-function/a/c');
    assert.equal(sub.headers['x-flint-function-namespace'], 'default');
    assert.equal(sub.headers['x-flint-function-name'], 'a');
    assert.equal(sub.url, '/c');
  });

  it('maps executor errors through their FlintError status', async () => {
    assertJsonError(await get('/busy'), 429, 'FLINT_ERR_TOO_MANY_REQUESTS');
    assertJsonError(await get('/broken'), 500, 'FLINT_ERR_SPECIALIZE_FAILED');
    assertJsonError(await get('/nopkg'), 404, 'FLINT_ERR_NOT_FOUND');
  });

  it('answers 502 and releases each instance as unreachable when its socket refuses, after trying three others', async () => {
    const before = executor.releases.length;
    assertJsonError(await get('/dead'), 502, 'FLINT_ERR_FUNCTION_UNREACHABLE');
    assertJsonError(await get('/vanished'), 502, 'FLINT_ERR_FUNCTION_UNREACHABLE');
    const outcomes = executor.releases.slice(before).map((r) => `${r.fn} ${r.outcome}`);
    assert.deepEqual(outcomes, [...Array(4).fill('default/dead unreachable'), ...Array(4).fill('default/vanished unreachable')]);
  });

  it('sends a request that could not reach its instance to another instance, body and all', async () => {
    const placement = (): Placement => ({ socketPath: path.join(dir, 'never-there.sock'), next: { socketPath: workerA.socketPath } });
    executor.placements.set('default/revived', placement());
    const before = executor.releases.length;
    const r = await get('/revived/again');
    assert.equal(r.status, 200, r.text());
    assert.equal(r.json().url, '/again');
    assert.deepEqual(
      executor.releases.slice(before).map((x) => x.outcome),
      ['unreachable', 'ok'],
    );
    // A body is not read before the connection is up, so it goes whole to the next instance.
    executor.placements.set('default/revived', placement());
    const mark = executor.releases.length;
    const posted = await get('/revived/again', { method: 'POST', body: 'sent once, whole' });
    assert.equal(posted.status, 200, posted.text());
    assert.equal(posted.json().method, 'POST');
    assert.equal(posted.json().bodyBytes, 'sent once, whole'.length);
    assert.deepEqual(
      executor.releases.slice(mark).map((x) => x.outcome),
      ['unreachable', 'ok'],
    );
  });

  it('retries a connect its instance refuses with a full accept queue (EAGAIN), without condemning the instance', async () => {
    const { child, leases } = await crowdedInstance('crowded');
    try {
      const before = leases();
      child.kill('SIGSTOP');
      const answers = Promise.all(Array.from({ length: 12 }, () => get('/crowded')));
      // Each refused connect gives its lease back ('ok') and takes another: the instance is let go once some were.
      await eventually(() => leases().length > before.length + 12, 'connects refused and retried');
      child.kill('SIGCONT');
      for (const r of await answers) assert.equal(r.status, 200, r.text());
      assert.deepEqual([...new Set(leases().slice(before.length))], ['ok']);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('answers 429 with Retry-After to what could not connect to its busy instance in a second of retries', async () => {
    const { child, leases } = await crowdedInstance('crowded2');
    try {
      const before = leases();
      child.kill('SIGSTOP');
      const calls = Array.from({ length: 8 }, () => get('/crowded2'));
      // While the instance is stopped nothing can answer 200: the first answer is a refusal.
      const first = await Promise.race(calls);
      assertJsonError(first, 429, 'FLINT_ERR_TOO_MANY_REQUESTS');
      assert.equal(first.headers['retry-after'], '1');
      assert.match(first.json().message, /accept queues stayed full/);
      child.kill('SIGCONT');
      const got = await Promise.all(calls);
      // The two its queue held are answered once it runs again.
      assert.ok(got.some((r) => r.status === 200), got.map((r) => r.status).join(' '));
      for (const r of got.filter((x) => x.status !== 200)) assertJsonError(r, 429, 'FLINT_ERR_TOO_MANY_REQUESTS');
      assert.deepEqual([...new Set(leases().slice(before.length))], ['ok']);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('answers 502 when the instance drops the connection mid-request', async () => {
    const before = executor.releases.length;
    assertJsonError(await get('/api/reset'), 502, 'FLINT_ERR_FUNCTION_UNREACHABLE');
    assert.deepEqual(
      executor.releases.slice(before).map((r) => r.outcome),
      ['unreachable'],
    );
  });

  it('refuses a response framed twice, so a function cannot smuggle a second response onto the client connection', async () => {
    const sock = path.join(dir, 'smuggler.sock');
    const evil = 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil';
    const smuggler = net.createServer((c) => {
      c.on('data', () => c.write(`HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n${(5 + evil.length).toString(16)}\r\nhello${evil}\r\n0\r\n\r\n`));
    });
    smuggler.listen(sock);
    await once(smuggler, 'listening');
    executor.placements.set('default/smuggler', { socketPath: sock });
    await put(fn('smuggler'), route('smuggler', { relativeurl: '/smuggle', fn: 'smuggler' }));
    await waitStatus('/smuggle', 502);
    // Two requests on one client connection: the second must get its own answer.
    const u = new URL(url);
    const client = net.connect(Number(u.port), u.hostname);
    client.write(`GET /smuggle HTTP/1.1\r\nHost: x\r\n\r\nGET /router-healthz HTTP/1.1\r\nHost: x\r\n\r\n`);
    let got = '';
    client.on('data', (d) => {
      got += d.toString('latin1');
    });
    for (let i = 0; i < 100 && (got.match(/HTTP\/1\.1 /g) ?? []).length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    client.destroy();
    smuggler.close();
    const statuses = (got.match(/HTTP\/1\.1 \d{3}/g) ?? []).map((l) => l.slice(9));
    assert.deepEqual(statuses, ['502', '200']);
    assert.ok(!got.includes('evil'), got);
    assert.match(got, /both Transfer-Encoding and Content-Length/);
  });

  it('reads every answer on a kept-alive instance connection by its own head: a repeat is passed on as before, a change of one byte is parsed anew', async () => {
    const sock = path.join(dir, 'repeater.sock');
    // The same head three times, then one of the same length whose last line frames the body a second time.
    const good = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Pad: aaaaaaaaaa\r\n\r\nhello';
    const evil = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 9\r\n\r\nhello';
    assert.equal(evil.length, good.length);
    let n = 0;
    let connections = 0;
    const repeater = net.createServer((c) => {
      connections++;
      c.on('data', () => {
        n++;
        c.write(n <= 3 ? good : n === 4 ? evil : `HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-N: ${n}\r\n\r\nhello`);
      });
    });
    repeater.listen(sock);
    await once(repeater, 'listening');
    try {
      executor.placements.set('default/repeater', { socketPath: sock });
      await put(fn('repeater'), route('repeater', { relativeurl: '/repeat', fn: 'repeater' }));
      const seen: string[] = [];
      for (let i = 0; i < 7; i++) {
        const r = await get('/repeat');
        seen.push(`${r.status} ${r.status === 200 ? `${r.text()} ${r.headers['x-pad'] ?? r.headers['x-n']}` : r.json().message}`);
      }
      assert.deepEqual(seen.slice(0, 3), ['200 hello aaaaaaaaaa', '200 hello aaaaaaaaaa', '200 hello aaaaaaaaaa']);
      assert.match(seen[3], /^502 .*conflicting Content-Length/);
      // A fresh connection after the refusal; heads that change every time are each read as they are.
      assert.deepEqual(seen.slice(4), ['200 hello 5', '200 hello 6', '200 hello 7']);
      assert.equal(connections, 2, 'one connection carried the first four answers, the next carried the rest');
    } finally {
      repeater.close();
    }
  });

  it('answers 504 after functionTimeout and releases the instance as timed out', async () => {
    const before = executor.releases.length;
    assertJsonError(await get('/quick/slow'), 504, 'FLINT_ERR_FUNCTION_TIMEOUT');
    assert.deepEqual(
      executor.releases.slice(before).map((r) => `${r.fn} ${r.outcome}`),
      ['default/quick timeout'],
    );
  });

  it('releases the instance as ok after a normal response', async () => {
    const before = executor.releases.length;
    await echo('/hello');
    assert.deepEqual(
      executor.releases.slice(before).map((r) => `${r.fn} ${r.outcome}`),
      ['default/hello ok'],
    );
  });

  it('answers a chunked body that turns malformed mid-forward with a 400 JSON, and releases the instance', async () => {
    await echo('/hello');
    const before = executor.releases.length;
    const acquired = executor.acquired.length;
    const target = new URL(url);
    const sock = net.connect(Number(target.port), target.hostname);
    await once(sock, 'connect');
    const chunks: Buffer[] = [];
    sock.on('data', (c) => chunks.push(c));
    sock.write('POST /flint-function/hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
    // The instance is already taking the body when the bad chunk size arrives.
    await eventually(() => executor.acquired.length > acquired, 'the request was leased');
    await new Promise((r) => setTimeout(r, 20));
    sock.write('5x\r\nworld\r\n0\r\n\r\n');
    await once(sock, 'close');
    const text = Buffer.concat(chunks).toString('latin1');
    assert.match(text, /^HTTP\/1\.1 400 /);
    assert.match(text, /\r\nx-flint-request-id: \S+\r\n/i);
    assert.equal((text.match(/HTTP\/1\.1 /g) ?? []).length, 1, text);
    assert.match(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).message, /bad chunk size line "5x"/);
    await eventually(() => executor.releases.length > before, 'the instance was released');
    assert.deepEqual(executor.releases.slice(before).map((r) => r.fn), ['default/hello']);
  });

  it('answers pipelined requests in order, each leased and released in turn', async () => {
    await echo('/hello'); // warm: later leases are taken synchronously, inside the previous response's end()
    const before = executor.releases.length;
    const target = new URL(url);
    const sock = net.connect(Number(target.port), target.hostname);
    await once(sock, 'connect');
    const n = 3;
    let wire = '';
    for (let i = 1; i <= n; i++) wire += `GET /hello?i=${i} HTTP/1.1\r\nHost: x\r\n${i === n ? 'Connection: close\r\n' : ''}\r\n`;
    sock.write(wire);
    const chunks: Buffer[] = [];
    sock.on('data', (c) => chunks.push(c));
    await once(sock, 'end');
    sock.destroy();
    const text = Buffer.concat(chunks).toString('latin1');
    const urls: string[] = [];
    let rest = text;
    while (rest.length > 0) {
      const headEnd = rest.indexOf('\r\n\r\n');
      assert.ok(headEnd > 0, `a response head in ${JSON.stringify(rest.slice(0, 200))}`);
      const head = rest.slice(0, headEnd);
      assert.match(head, /^HTTP\/1\.1 200 /);
      assert.match(head, /\r\nTransfer-Encoding: chunked\r\n/i);
      rest = rest.slice(headEnd + 4);
      let body = '';
      for (;;) {
        const lineEnd = rest.indexOf('\r\n');
        const size = Number.parseInt(rest.slice(0, lineEnd), 16);
        rest = rest.slice(lineEnd + 2);
        if (size === 0) {
          assert.equal(rest.slice(0, 2), '\r\n');
          rest = rest.slice(2);
          break;
        }
        body += rest.slice(0, size);
        rest = rest.slice(size + 2);
      }
      urls.push((JSON.parse(body) as Echo).url);
    }
    assert.deepEqual(urls, ['/hello?i=1', '/hello?i=2', '/hello?i=3']);
    assert.deepEqual(
      executor.releases.slice(before).map((r) => `${r.fn} ${r.outcome}`),
      ['default/hello ok', 'default/hello ok', 'default/hello ok'],
    );
  });

  it('streams a large request body in and the response out without buffering either', async () => {
    const u = new URL(url);
    const chunk = Buffer.alloc(1 << 20, 7);
    const total = 24;
    const sent = createHash('sha256');
    const got = createHash('sha256');
    let received = 0;
    const req = http.request({ host: u.hostname, port: u.port, path: '/flint-function/hello/pipe', method: 'POST', agent: false, headers: { 'content-type': 'application/octet-stream' } });
    req.write(chunk);
    sent.update(chunk);
    // The echoed first megabyte arrives while most of the body is still unsent:
    // neither direction waits for the whole message.
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    assert.equal(res.statusCode, 200);
    const done = new Promise<void>((resolve, reject) => {
      res.on('data', (c: Buffer) => {
        received += c.length;
        got.update(c);
      });
      res.on('end', resolve);
      res.on('error', reject);
    });
    await eventually(() => received > 0, 'first echoed bytes');
    for (let i = 1; i < total; i++) {
      sent.update(chunk);
      if (!req.write(chunk)) await once(req, 'drain');
    }
    req.end();
    await done;
    assert.equal(received, total * chunk.length);
    assert.equal(got.digest('hex'), sent.digest('hex'));
  });

  it('streams a large response and drops the hop-by-hop headers the function named', async () => {
    const r = await get('/api/big?bytes=33554432');
    assert.equal(r.status, 200);
    assert.equal(r.body.length, 33554432);
    assert.equal(r.headers['x-worker-hop'], undefined);
  });

  it('forwards a request body with its length', async () => {
    const body = Buffer.alloc(300_000, 'x');
    const e = await echo('/flint-function/hello', { method: 'POST', body });
    assert.equal(e.bodyBytes, body.length);
    assert.equal(e.bodySha256, createHash('sha256').update(body).digest('hex'));
    assert.equal(e.headers['content-length'], String(body.length));
  });

  it('cancels a pending acquire when the client goes away', async () => {
    const aborted = executor.aborted;
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, path: '/stuck', agent: false });
    req.on('error', () => {});
    req.end();
    await eventually(() => executor.acquired.includes('default/stuck'), 'acquire of stuck');
    req.destroy();
    await eventually(() => executor.aborted > aborted, 'the acquire signal to abort');
  });

  it('cancels the upstream request and releases the instance when the client goes away mid-response', async () => {
    const before = executor.releases.length;
    const seen = workerA.seen.length;
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, path: '/api/slow-abort', agent: false });
    req.on('error', () => {});
    req.end();
    await eventually(() => workerA.seen.slice(seen).includes('/slow-abort'), 'the worker to get the request');
    req.destroy();
    await eventually(() => executor.releases.length > before, 'the release');
    assert.equal(executor.releases.at(-1)?.outcome, 'ok');
  });

  it('spreads a canary route over its weighted functions', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 40 && seen.size < 2; i++) seen.add((await echo('/canary')).instance);
    assert.deepEqual([...seen].sort(), ['a', 'b']);
  });

  it('picks up routes added, changed and removed in the store without a restart', async () => {
    await put(route('live', { relativeurl: '/live-1' }));
    await waitStatus('/live-1', 200);
    const cur = (await store.get('HTTPTrigger', 'default', 'live'))!;
    await store.update({ ...cur, spec: { ...cur.spec, relativeurl: '/live-2' } });
    await waitStatus('/live-2', 200);
    assertJsonError(await get('/live-1'), 404, 'FLINT_ERR_NOT_FOUND');
    await store.delete('HTTPTrigger', 'default', 'live');
    await waitStatus('/live-2', 404);
  });

  it('forwards the new resourceVersion after a function update', async () => {
    const cur = (await store.get('Function', 'default', 'hello'))!;
    const updated = await store.update({ ...cur, spec: { ...cur.spec, env: { A: '1' } } });
    await eventually(async () => (await echo('/hello')).headers['x-flint-function-resourceversion'] === updated.metadata.resourceVersion, 'new resourceVersion');
  });

  it('exports Prometheus metrics', async () => {
    await echo('/hello');
    const r = await get('/metrics');
    assert.equal(r.status, 200);
    const text = r.text();
    assert.match(text, /flint_router_requests_total\{code="200",method="GET",function="hello",namespace="default"\} \d+/);
    assert.match(text, /flint_router_requests_total\{code="404",method="GET",function="",namespace=""\} \d+/);
    assert.match(text, /flint_router_requests_total\{code="502",method="GET",function="dead",namespace="default"\} 1/);
    assert.match(text, /flint_router_cold_starts_total\{function="hello",namespace="default"\} 1/);
    assert.match(text, /flint_router_request_duration_seconds_count\{function="hello",namespace="default"\} \d+/);
    assert.match(text, /flint_router_in_flight_requests 0/);
  });

  it('sums requests and 5xx answers per function for the canary controller, as /metrics counts them', async () => {
    await echo('/hello');
    assert.equal((await get('/dead')).status, 502);
    const counts = router.metrics.functionCounts();
    const text = (await get('/metrics')).text();
    const exposed = (fn: string, code: RegExp) =>
      [...text.matchAll(/^flint_router_requests_total\{code="(\d+)",method="[A-Z]+",function="([^"]*)",namespace="default"\} (\d+)$/gm)]
        .filter((m) => m[2] === fn && code.test(m[1]))
        .reduce((a, m) => a + Number(m[3]), 0);
    for (const fn of ['hello', 'dead']) {
      assert.deepEqual(counts.get(`default/${fn}`), { requests: exposed(fn, /./), failures: exposed(fn, /^5/) }, fn);
    }
    assert.ok((counts.get('default/dead')?.failures ?? 0) >= 1, 'a 502 for an unreachable function is a failure of that function');
  });
});

describe('router upgrades', () => {
  const releasesOf = (before: number) => executor.releases.slice(before).map((r) => `${r.fn} ${r.outcome}`);
  const firstLine = (rest: Buffer) => rest.includes('\n');

  it('switches protocols end to end and carries bytes both ways, the instance leased until the connection closes', async () => {
    await echo('/hello');
    const before = executor.releases.length;
    const up = await upgradeCall(url, '/hello?x=1', { 'Sec-WebSocket-Key': 'k', 'X-Flint-Function-Name': 'forged' }, Buffer.from('early:'));
    assert.equal(up.status, 101, up.head);
    assert.match(up.head, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
    assert.match(up.head, /\r\nUpgrade: websocket(\r\n|$)/i);
    assert.match(up.head, /\r\nConnection: Upgrade(\r\n|$)/i);
    assert.match(up.head, /\r\nX-Worker: a(\r\n|$)/);
    assert.match(up.head, /\r\nX-Flint-Request-Id: \S+/i);
    assert.doesNotMatch(up.head, /Transfer-Encoding|Content-Length|Keep-Alive/i);
    const rest = await up.until(firstLine, 'the worker\'s first line');
    const seen = JSON.parse(rest.subarray(0, rest.indexOf('\n')).toString());
    assert.equal(seen.url, '/hello?x=1');
    assert.equal(seen.headers.upgrade, 'websocket');
    assert.equal(seen.headers.connection, 'Upgrade');
    assert.equal(seen.headers['sec-websocket-key'], 'k');
    assert.equal(seen.headers['x-flint-function-name'], 'hello', 'the router sets the function headers, never the client');
    // Bytes sent right behind the head reach the instance, then everything echoes.
    await up.until((b) => b.includes('early:'), 'the early bytes echoed');
    up.socket.write('ping');
    await up.until((b) => b.includes('early:ping'), 'ping echoed');
    assert.deepEqual(releasesOf(before), [], 'the instance is busy while the connection is open');
    assert.match((await get('/metrics')).text(), /^flint_router_upgraded_connections 1$/m);
    assert.match((await get('/metrics')).text(), /flint_router_requests_total\{code="101",method="GET",function="hello",namespace="default"\} 1/);
    up.socket.end();
    await up.closed;
    await eventually(() => releasesOf(before).length === 1, 'the release');
    assert.deepEqual(releasesOf(before), ['default/hello ok']);
    assert.match((await get('/metrics')).text(), /^flint_router_upgraded_connections 0$/m);
  });

  it('passes on an ordinary answer to an upgrade request, then closes the connection', async () => {
    const before = executor.releases.length;
    const up = await upgradeCall(url, '/api/refuse');
    assert.equal(up.status, 403, up.head);
    assert.match(up.head, /\r\nConnection: close(\r\n|$)/i);
    await up.closed;
    assert.equal(up.rest.toString(), 'nope');
    assert.deepEqual(releasesOf(before), ['default/hello ok']);
  });

  it('never sends another request on a connection that carried an upgrade, even one declined without closing', async () => {
    await echo('/quick/warm');
    const up = await upgradeCall(url, '/quick/refuse-open');
    assert.equal(up.status, 403, up.head);
    await up.closed;
    // The instance no longer reads that connection: a request sent on it would time out (504).
    const r = await get('/quick/after');
    assert.equal(r.status, 200, r.text());
  });

  it('answers 502 to a 101 that names no protocol, 504 when the 101 never comes, 404 without a route', async () => {
    for (const [p, status, code] of [
      ['/api/bare', 502, 'FLINT_ERR_FUNCTION_UNREACHABLE'],
      ['/quick/slow', 504, 'FLINT_ERR_FUNCTION_TIMEOUT'],
      ['/nowhere', 404, 'FLINT_ERR_NOT_FOUND'],
    ] as const) {
      const up = await upgradeCall(url, p);
      assert.equal(up.status, status, up.head);
      await up.closed;
      assert.equal(JSON.parse(up.rest.toString()).code, code);
    }
  });

  it('takes an upgrade request with a body as an ordinary request', async () => {
    const up = await upgradeCall(url, '/hello', { 'Content-Length': '2' }, Buffer.from('hi'));
    assert.equal(up.status, 200, up.head);
    const seen: Echo = JSON.parse((await up.until((b) => b.includes('}'), 'the echo')).toString().replace(/^[^{]*/, '').replace(/[^}]*$/, ''));
    assert.equal(seen.bodyBytes, 2);
    assert.equal(seen.headers.upgrade, undefined);
    up.socket.destroy();
  });

  it('closes the instance side when the client goes, and cuts open tunnels when it stops', async () => {
    const own = createRouter({ store, executor, logger, host: '127.0.0.1', port: 0, drainMs: 100 });
    const ownUrl = (await own.start()).url;
    try {
      await eventually(async () => (await call(ownUrl, '/hello')).status === 200, 'routes on the second router');
      const before = executor.releases.length;
      const a = await upgradeCall(ownUrl, '/hello');
      const b = await upgradeCall(ownUrl, '/hello');
      assert.equal(a.status, 101);
      assert.equal(b.status, 101);
      a.socket.destroy();
      await eventually(() => releasesOf(before).length === 1, 'the first release');
      await own.stop();
      await b.closed;
      await eventually(() => releasesOf(before).length === 2, 'the second release');
    } finally {
      await own.stop();
    }
  });
});

/** A streamed GET: the events received, and how the response ended. */
function stream(p: string): Promise<{ status: number; events: string[]; complete: boolean }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: u.hostname, port: u.port, path: p, agent: false }, (res) => {
      const events: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (c: string) => events.push(...c.split('\n\n').filter(Boolean)));
      // An incomplete chunked body ends in 'aborted'/'error' and 'close' without 'end'.
      res.on('error', () => {});
      res.on('close', () => resolve({ status: res.statusCode ?? 0, events, complete: res.complete }));
    });
    req.on('error', reject);
  });
}

describe('router streaming limits', () => {
  const releasesOf = (before: number) => executor.releases.slice(before).map((r) => `${r.fn} ${r.outcome}`);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('lets a stream go quiet for its idle limit instead of functionTimeout, and ends it at its maximum duration, keeping the instance', async () => {
    const before = executor.releases.length;
    // An event every 1.3 s: longer than functionTimeout (1 s), shorter than the idle limit (2 s); cut at 3 s.
    const r = await stream('/streamy/drip?ms=1300');
    assert.equal(r.status, 200);
    assert.equal(r.complete, false, 'the client sees the response was cut');
    assert.ok(r.events.length >= 3, `events before the cut: ${JSON.stringify(r.events)}`);
    assert.deepEqual(releasesOf(before), ['default/streamy ok']);
    // The client got a 200 stream, and that is what is counted: a stream at its limit is no error.
    const metrics = (await get('/metrics')).text();
    assert.match(metrics, /flint_router_requests_total\{code="200",method="GET",function="streamy",namespace="default"\} \d+/);
    assert.doesNotMatch(metrics, /code="504",method="GET",function="streamy"/);
  });

  it('cuts a stream silent for longer than its idle limit, keeping the instance', async () => {
    const before = executor.releases.length;
    const r = await stream('/streamy/drip?ms=60000');
    assert.equal(r.complete, false);
    assert.deepEqual(r.events, ['data: 0']);
    assert.deepEqual(releasesOf(before), ['default/streamy ok']);
  });

  it('closes a WebSocket silent both ways for the idle limit, and one that talks at its maximum duration', async () => {
    const before = executor.releases.length;
    const quiet = await upgradeCall(url, '/streamy');
    assert.equal(quiet.status, 101, quiet.head);
    await quiet.closed;
    const talking = await upgradeCall(url, '/streamy');
    assert.equal(talking.status, 101, talking.head);
    let open = true;
    void talking.closed.then(() => {
      open = false;
    });
    for (let i = 0; i < 5; i++) {
      talking.socket.write('.');
      await sleep(500);
    }
    assert.equal(open, true, 'still open after 2.5 s of traffic: past the idle limit, within the maximum');
    await talking.closed;
    await eventually(() => releasesOf(before).length === 2, 'both releases');
    assert.deepEqual(releasesOf(before), ['default/streamy ok', 'default/streamy ok']);
  });

  it('applies the limits only to the protocol named: websocket leaves HTTP to functionTimeout, sse leaves WebSockets open', async () => {
    const before = executor.releases.length;
    const r = await stream('/wsonly/drip?ms=1500');
    assert.equal(r.complete, false);
    assert.deepEqual(releasesOf(before), ['default/wsonly timeout'], 'a stalled body under functionTimeout is a hung instance');
    // sse: an event stream gets the idle limit, a response with a Content-Length keeps functionTimeout.
    const sse = await stream('/sseonly/drip?ms=5000');
    assert.deepEqual(sse.events, ['data: 0']);
    const sized = await get('/sseonly/half').catch((err: Error) => err);
    assert.ok(sized instanceof Error, 'the sized response is cut');
    assert.deepEqual(releasesOf(before).slice(1), ['default/sseonly ok', 'default/sseonly timeout']);
    const ws = await upgradeCall(url, '/sseonly');
    assert.equal(ws.status, 101, ws.head);
    await sleep(1500);
    assert.equal(ws.socket.destroyed, false, 'no idle limit on WebSockets when protocol is sse');
    ws.socket.write('still here');
    await ws.until((b) => b.includes('still here'), 'the echo');
    ws.socket.destroy();
  });
});

describe('router hooks', () => {
  it('runs beforeRoute before matching, exempting public endpoints, and serves extra endpoints', async () => {
    const seen: string[] = [];
    const guarded = createRouter({
      store,
      executor,
      logger,
      host: '127.0.0.1',
      port: 0,
      beforeRoute(req, res, info) {
        seen.push(info.path);
        if (req.headers.authorization === 'Bearer ok') return true;
        res.writeHead(401, ['content-type', 'application/json']);
        res.end(JSON.stringify({ message: 'Unauthorized: malformed Token', statusCode: 401 }));
        return false;
      },
      endpoints: [
        {
          path: '/auth/login',
          public: true,
          handle(_req, res) {
            res.writeHead(201, ['content-type', 'application/json']);
            res.end('{"accesstoken":"ok"}');
          },
        },
      ],
    });
    const g = (await guarded.start()).url;
    try {
      const denied = await call(g, '/hello');
      assert.equal(denied.status, 401);
      assert.ok(denied.headers['x-flint-request-id'], 'hook answers carry the request id');
      assert.equal((await call(g, '/hello', { headers: { authorization: 'Bearer ok' } })).status, 200);
      assert.equal((await call(g, '/flint-function/hello')).status, 401);
      assert.equal((await call(g, '/router-healthz')).status, 200);
      assert.equal((await call(g, '/auth/login', { method: 'POST' })).status, 201);
      assert.deepEqual(seen, ['/hello', '/hello', '/flint-function/hello']);
      // Async hooks work the same way.
    } finally {
      await guarded.stop();
    }
  });

  it('accepts an async beforeRoute', async () => {
    const r2 = createRouter({ store, executor, logger, host: '127.0.0.1', port: 0, beforeRoute: async () => true });
    const u = (await r2.start()).url;
    try {
      assert.equal((await call(u, '/hello')).status, 200);
    } finally {
      await r2.stop();
    }
  });

  it('limits a request to the gate beforeRoute returns, once the route names the function', async () => {
    const gated = (scope: TokenScope) =>
      createRouter({ store, executor, logger, host: '127.0.0.1', port: 0, beforeRoute: (req) => (req.headers.authorization === 'Bearer scoped' ? scope : true) });
    const only = gated(new TokenScope(['default/hello'], ['GET']));
    const both = gated(new TokenScope(['default/hello', 'default/fb'], undefined));
    const u = (await only.start()).url;
    const v = (await both.start()).url;
    const scoped = { headers: { authorization: 'Bearer scoped' } };
    try {
      assert.equal((await call(u, '/hello', scoped)).status, 200, 'its function, through a route');
      assert.equal((await call(u, '/flint-function/hello', scoped)).status, 200, 'its function, through the internal path');
      const other = await call(u, '/flint-function/fb', scoped);
      assertJsonError(other, 403, 'FLINT_ERR_FORBIDDEN');
      assert.equal(other.json().message, "Forbidden: function default/fb is not in this token's scope");
      assert.equal((await call(u, '/where', { headers: { ...scoped.headers, host: 'api.example.com' } })).status, 403, 'another function through a route');
      assert.match((await call(u, '/flint-function/a/b', scoped)).json().message, /function a\/b is not in this token's scope/, 'another namespace');
      const post = await call(u, '/flint-function/hello', { ...scoped, method: 'POST' });
      assertJsonError(post, 403, 'FLINT_ERR_FORBIDDEN');
      assert.match(post.json().message, /method POST is not allowed by this token's scope \(it allows GET\)/);
      const canary = await call(u, '/canary', scoped);
      assert.equal(canary.status, 403, 'a weighted route needs every function it may pick in scope');
      assert.match(canary.json().message, /function default\/fb is not in this token's scope \(this route may send the request to any of its functions\)/);
      assert.equal((await call(v, '/canary', scoped)).status, 200);
      assert.equal((await call(v, '/flint-function/fb', { ...scoped, method: 'DELETE' })).status, 200, 'no methods named: any method');
      assertJsonError(await call(u, '/metrics', scoped), 403, 'FLINT_ERR_FORBIDDEN');
      assert.equal((await call(u, '/metrics')).status, 200, 'an unscoped request keeps its meaning');
      assert.equal((await call(u, '/flint-function/fb')).status, 200);
      assert.equal((await call(u, '/nothing-here', scoped)).status, 404);
    } finally {
      await only.stop();
      await both.stop();
    }
  });

  it('leaving rotation, keeps serving, closes each connection after its answer and fails its health check', async () => {
    const leaving = createRouter({ store, executor, logger, host: '127.0.0.1', port: 0 });
    const u = new URL((await leaving.start()).url);
    // A keep-alive client's request: the answer's head, and the connection's end (the server's doing: the client keeps it).
    const exchange = async (target: string) => {
      const socket = net.connect(Number(u.port), u.hostname);
      await once(socket, 'connect');
      let got = '';
      socket.on('data', (d) => {
        got += d.toString('latin1');
      });
      const ended = once(socket, 'end');
      socket.write(`GET ${target} HTTP/1.1\r\nHost: h\r\n\r\n`);
      await eventually(async () => /\r\n\r\n/.test(got), 'the answer');
      return { head: got.split('\r\n\r\n')[0], socket, ended };
    };
    try {
      const before = await exchange('/hello');
      before.socket.destroy();
      assert.match(before.head, /^HTTP\/1\.1 200/);
      assert.doesNotMatch(before.head, /Connection: close/i);
      await leaving.leaveRotation(0);
      const after = await exchange('/hello');
      assert.match(after.head, /^HTTP\/1\.1 200/, 'still served');
      assert.match(after.head, /\r\nConnection: close/i);
      await after.ended;
      const health = await exchange('/router-healthz');
      health.socket.destroy();
      assert.match(health.head, /^HTTP\/1\.1 503/, 'out of rotation for health checks');
    } finally {
      await leaving.stop();
    }
  });

  it("passes the caller's Authorization on unless told not to", async () => {
    const withAuth = { headers: { authorization: 'Bearer caller-token' } };
    assert.equal((await echo('/hello', withAuth)).headers.authorization, 'Bearer caller-token', 'by default (no auth of the router consumes it)');
    const dropping = createRouter({ store, executor, logger, host: '127.0.0.1', port: 0, forwardAuthorization: false });
    const u = (await dropping.start()).url;
    try {
      const r = await call(u, '/hello', { headers: { Authorization: 'Bearer caller-token', 'X-Other': 'kept' } });
      assert.equal(r.status, 200);
      const e: Echo = r.json();
      assert.equal(e.headers.authorization, undefined);
      assert.equal(e.headers['x-other'], 'kept');
    } finally {
      await dropping.stop();
    }
  });
});
