// Router hot-path benchmark: `npx node src/router/router.bench.ts [seconds] [rounds]`.
//
// 1. Upstream client choice: the same hello worker (own process, Unix socket)
//    called through the router's worker client, undici Pool.dispatch, undici
//    Pool.request and node:http with a keep-alive Agent, sequentially
//    (latency) and 32 at a time (throughput).
// 2. End to end with wrk (own process): the worker called directly over TCP
//    vs through the router; the difference in p50 is the router's added
//    latency, the rps ratio its throughput cost. Two bare proxies (node:http
//    with undici, and with the worker client; no routing, no added headers)
//    run too: they are the ceilings of each stack on this machine, so the
//    router's numbers can be read against them as well as against the
//    direct call. A third bare proxy runs on the router's own HTTP/1.1
//    server (http1/) with the worker client: the ceiling of the router's
//    own stack.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { type Dispatcher, Pool } from 'undici';
import { fmt, hasWrk, sequentialLatency, wrk } from '../../bench/lib.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import { Http1Server } from './http1/server.ts';
import { createRouter } from './router.ts';
import { WorkerPool } from './worker-client/pool.ts';
import type { ResponseHandler } from './worker-client/types.ts';
import { FakeExecutor } from './testing/fake-executor.ts';
import { fnObj, routeObj } from './testing/fixtures.ts';

const seconds = Number(process.argv[2] ?? 3);
const ROUNDS = Number(process.argv[3] ?? 5);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-router-bench-'));
const socketPath = path.join(dir, 'worker.sock');

async function startWorker(): Promise<{ port: number; stop(): Promise<void> }> {
  const code = `
    const http = require('node:http');
    const h = (req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, {'content-type': 'text/plain'}); res.end('hello\\n'); }); };
    const a = http.createServer(h); a.keepAliveTimeout = 60000;
    const b = http.createServer(h); b.keepAliveTimeout = 60000;
    a.listen(${JSON.stringify(socketPath)}, () => b.listen(0, '127.0.0.1', () => console.log(b.address().port)));`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  return {
    port: Number(chunk.toString().trim()),
    async stop() {
      child.kill();
      await once(child, 'exit');
    },
  };
}

class Sink implements Dispatcher.DispatchHandler {
  readonly #done: () => void;
  readonly #fail: (e: Error) => void;
  constructor(done: () => void, fail: (e: Error) => void) {
    this.#done = done;
    this.#fail = fail;
  }
  onConnect(): void {}
  onHeaders(): boolean {
    return true;
  }
  onData(): boolean {
    return true;
  }
  onComplete(): void {
    this.#done();
  }
  onError(err: Error): void {
    this.#fail(err);
  }
}

/** The part of a response the bare proxies use: node:http's and the router's server's both have it. */
interface BareResponse {
  statusCode: number;
  writeHead(status: number, headers: string[]): unknown;
  write(chunk: Buffer): boolean;
  end(): unknown;
}

/** What the bare proxies do with a response: drop the framing headers, stream the rest. */
class BareReply {
  readonly res: BareResponse;
  constructor(res: BareResponse) {
    this.res = res;
  }
  writeHead(status: number, count: number, at: (i: number) => string): void {
    const h: string[] = [];
    for (let i = 0; i < count; i += 2) {
      const n = at(i);
      const l = n.toLowerCase();
      if (l !== 'connection' && l !== 'keep-alive' && l !== 'transfer-encoding') h.push(n, at(i + 1));
    }
    this.res.writeHead(status, h);
  }
  onData(c: Buffer): boolean {
    return this.res.write(c);
  }
  onComplete(): void {
    this.res.end();
  }
  onError(): void {
    this.res.statusCode = 502;
    this.res.end();
  }
}

class BareProxyCall extends BareReply implements Dispatcher.DispatchHandler {
  onConnect(): void {}
  onHeaders(status: number, raw: Buffer[]): boolean {
    this.writeHead(status, raw.length, (i) => raw[i].toString('latin1'));
    return true;
  }
}

class BareWorkerClientCall extends BareReply implements ResponseHandler {
  onStart(): void {}
  onHeaders(status: number, headers: string[]): undefined {
    this.writeHead(status, headers.length, (i) => headers[i]);
    return undefined;
  }
}

/** About as many headers as the router forwards for a plain GET. */
const PROXY_HEADERS = [
  'user-agent', 'wrk', 'X-Flint-Function-Name', 'hello', 'X-Flint-Function-Namespace', 'default', 'X-Flint-Function-UID', 'f0e1d2c3',
  'X-Flint-Function-ResourceVersion', '12', 'X-Flint-Request-Id', 'abcdef-123456', 'X-Flint-Full-Url', '/hello', 'X-Forwarded-For', '127.0.0.1',
  'X-Forwarded-Host', '127.0.0.1:8080', 'Forwarded', 'host="127.0.0.1:8080"',
];

/** A bare proxy on the router's own server and worker client: the ceiling for the router's stack. */
async function startBareHttp1Proxy(): Promise<{ url: string; stop(): Promise<void> }> {
  const own = new WorkerPool({ socketPath }, { maxIdleMs: 60_000 });
  const server = new Http1Server({
    keepAliveTimeoutMs: 65_000,
    headersTimeoutMs: 66_000,
    handle(req, res) {
      own.dispatch({ path: req.url, method: req.method, headers: PROXY_HEADERS, body: null, timeoutMs: 60_000 }, new BareWorkerClientCall(res));
    },
    refuse(res) {
      res.statusCode = 400;
      res.end();
    },
    handlerFailed() {},
  });
  const { port } = await server.listen(0, '127.0.0.1');
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      await server.close(0);
      await own.close();
    },
  };
}

/** A bare proxy on node:http, forwarding with undici or with the worker client. */
async function startBareProxy(client: 'undici' | 'worker client'): Promise<{ url: string; stop(): Promise<void> }> {
  const pool = new Pool('http://localhost', { socketPath, pipelining: 1 });
  const own = new WorkerPool({ socketPath }, { maxIdleMs: 60_000 });
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    if (client === 'undici') {
      pool.dispatch({ path: req.url ?? '/', method: req.method as Dispatcher.HttpMethod, headers: PROXY_HEADERS, body: null }, new BareProxyCall(res));
    } else {
      own.dispatch({ path: req.url ?? '/', method: req.method as string, headers: PROXY_HEADERS, body: null, timeoutMs: 60_000 }, new BareWorkerClientCall(res));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await pool.close();
      await own.close();
    },
  };
}

const HEADERS = ['X-Flint-Function-Name', 'hello', 'X-Flint-Request-Id', 'abc-1', 'Accept', '*/*'];

async function compareClients(): Promise<void> {
  const pool = new Pool('http://localhost', { socketPath, pipelining: 1 });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const headersObj: Record<string, string> = {};
  for (let i = 0; i < HEADERS.length; i += 2) headersObj[HEADERS[i]] = HEADERS[i + 1];
  const own = new WorkerPool({ socketPath }, { maxIdleMs: 60_000 });
  const clients: Record<string, () => Promise<void>> = {
    'worker client': () =>
      new Promise<void>((resolve, reject) => {
        own.dispatch({ path: '/', method: 'GET', headers: HEADERS, body: null, timeoutMs: 60_000 }, {
          onStart() {},
          onHeaders: () => undefined,
          onData: () => true,
          onComplete: resolve,
          onError: reject,
        });
      }),
    'undici Pool.dispatch': () =>
      new Promise<void>((resolve, reject) => {
        pool.dispatch({ path: '/', method: 'GET', headers: HEADERS }, new Sink(resolve, reject));
      }),
    'undici Pool.request': async () => {
      const r = await pool.request({ path: '/', method: 'GET', headers: HEADERS });
      for await (const _ of r.body) {
        // drain
      }
    },
    'node:http Agent': () =>
      new Promise<void>((resolve, reject) => {
        const req = http.request({ socketPath, path: '/', method: 'GET', headers: headersObj, agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', reject);
        req.end();
      }),
  };
  console.log('\nupstream client over a Unix socket (same worker process):');
  console.log('client                     p50 us   p99 us   rps@32');
  for (const [name, once1] of Object.entries(clients)) {
    const lat = await sequentialLatency(once1, 5000, 1000);
    const n = 20_000;
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next++ < n) await once1();
      }),
    );
    const rps = n / ((performance.now() - t0) / 1000);
    console.log(`${name.padEnd(25)} ${fmt(lat.p50, 1).padStart(7)}  ${fmt(lat.p99, 1).padStart(7)}  ${fmt(rps).padStart(7)}`);
  }
  await pool.close();
  await own.close();
  agent.destroy();
}

async function endToEnd(workerPort: number): Promise<void> {
  if (!(await hasWrk())) {
    console.log('\nwrk not found: end-to-end part skipped');
    return;
  }
  const store = openSqliteStore(path.join(dir, 'flint.db'));
  await store.create(fnObj('hello'));
  await store.create(routeObj('hello', { relativeurl: '/hello' }));
  const executor = new FakeExecutor({ socketPath });
  const router = createRouter({ store, executor, logger: pino({ level: 'silent' }), host: '127.0.0.1', port: 0 });
  const { url } = await router.start();
  const bare = await startBareProxy('undici');
  const bareOwn = await startBareProxy('worker client');
  const bareHttp1 = await startBareHttp1Proxy();
  try {
    const targets = {
      direct: `http://127.0.0.1:${workerPort}/hello`,
      'bare undici': `${bare.url}/hello`,
      'bare own': `${bareOwn.url}/hello`,
      'bare http1': `${bareHttp1.url}/hello`,
      router: `${url}/hello`,
    };
    // Warm every path (JIT, pools).
    for (const u of Object.values(targets)) await wrk(u, { seconds: 1, connections: 8 });
    // Rounds alternate the targets so that drift in the machine's speed hits them all alike.
    const p50s = new Map<string, number[]>();
    const rpss = new Map<string, number[]>();
    let failed = 0;
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, u] of Object.entries(targets)) {
        const lat = await wrk(u, { seconds, connections: 1 });
        const thr = await wrk(u, { seconds, connections: 32 });
        failed += thr.non2xx + thr.errors;
        p50s.set(name, [...(p50s.get(name) ?? []), lat.p50Us]);
        rpss.set(name, [...(rpss.get(name) ?? []), thr.rps]);
      }
    }
    console.log(`\nend to end (wrk, own process; latency with 1 connection, throughput with 32; medians of ${ROUNDS} alternating rounds):`);
    console.log('target        p50 us  added us       rps  ratio');
    const direct = { p50: median(p50s.get('direct') ?? []), rps: median(rpss.get('direct') ?? []) };
    for (const name of Object.keys(targets)) {
      const p50 = median(p50s.get(name) ?? []);
      const rps = median(rpss.get(name) ?? []);
      console.log(
        `${name.padEnd(12)} ${fmt(p50, 1).padStart(7)}  ${fmt(p50 - direct.p50, 1).padStart(8)}  ${fmt(rps).padStart(8)}  ${fmt(rps / direct.rps, 2).padStart(5)}x`,
      );
    }
    if (failed > 0) console.log(`(${failed} non-2xx answers or errors)`);
  } finally {
    await bare.stop();
    await bareOwn.stop();
    await bareHttp1.stop();
    await router.stop();
    await store.close();
  }
}

const worker = await startWorker();
try {
  await compareClients();
  await endToEnd(worker.port);
} finally {
  await worker.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
