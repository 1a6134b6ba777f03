import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { WorkerPool } from './pool.ts';
import type { ResponseHandler, UpstreamRequest } from './types.ts';

interface Answer {
  status: number;
  headers: string[];
  body: string;
}

/** Collects one response; `pauseAfter` chunks makes it push back until resumed. */
class Collect implements ResponseHandler {
  status = 0;
  headers: string[] = [];
  chunks: Buffer[] = [];
  abort: ((err: Error) => void) | undefined;
  resume: (() => void) | undefined;
  readonly done: Promise<Answer>;
  #resolve!: (a: Answer) => void;
  #reject!: (e: Error) => void;
  readonly #pauseAfter: number;
  calls = 0;

  constructor(pauseAfter = Number.POSITIVE_INFINITY) {
    this.#pauseAfter = pauseAfter;
    this.done = new Promise<Answer>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }
  onStart(abort: (err: Error) => void): void {
    this.abort = abort;
  }
  onHeaders(status: number, headers: string[], resume: () => void): undefined {
    this.status = status;
    this.headers = headers;
    this.resume = resume;
    return undefined;
  }
  onData(chunk: Buffer): boolean {
    this.chunks.push(Buffer.from(chunk));
    return this.chunks.length < this.#pauseAfter;
  }
  onComplete(): void {
    this.calls++;
    this.#resolve({ status: this.status, headers: this.headers, body: Buffer.concat(this.chunks).toString() });
  }
  onError(err: Error): void {
    this.calls++;
    this.#reject(err);
  }
}

function req(over: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return { method: 'GET', path: '/', headers: [], body: null, timeoutMs: 5000, ...over };
}

function call(pool: WorkerPool, r: UpstreamRequest = req(), handler = new Collect()): Promise<Answer> {
  pool.dispatch(r, handler);
  return handler.done;
}

let dir: string;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-wclient-'));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

let seq = 0;
async function httpServer(handler: http.RequestListener): Promise<{ socketPath: string; server: http.Server; accepted: () => number }> {
  const socketPath = path.join(dir, `h${++seq}.sock`);
  const server = http.createServer({ keepAliveTimeout: 30_000 }, handler);
  let n = 0;
  server.on('connection', () => n++);
  server.listen(socketPath);
  await once(server, 'listening');
  return { socketPath, server, accepted: () => n };
}

/** A server that answers each connection's data with what `reply` writes. */
async function rawServer(reply: (sock: net.Socket, data: string) => void): Promise<{ socketPath: string; server: net.Server; accepted: () => number }> {
  const socketPath = path.join(dir, `r${++seq}.sock`);
  let n = 0;
  const server = net.createServer((sock) => {
    n++;
    sock.on('error', () => {});
    sock.on('data', (d) => reply(sock, d.toString('latin1')));
  });
  server.listen(socketPath);
  await once(server, 'listening');
  return { socketPath, server, accepted: () => n };
}

function stop(server: net.Server): Promise<void> {
  (server as http.Server).closeAllConnections?.();
  return new Promise((r) => server.close(() => r()));
}

describe('WorkerPool', () => {
  it('reuses one keep-alive connection for sequential requests and opens more for concurrent ones', async () => {
    const h = await httpServer((q, s) => {
      q.resume();
      q.on('end', () => s.end(`${q.method} ${q.url} ${q.headers.host} ${q.headers['x-a']}`));
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    for (let i = 0; i < 5; i++) {
      const a = await call(pool, req({ path: `/p?i=${i}`, headers: ['X-A', 'b'] }));
      assert.equal(a.status, 200);
      assert.equal(a.body, `GET /p?i=${i} localhost b`);
    }
    assert.equal(h.accepted(), 1);
    assert.equal(pool.connections, 1);
    const all = await Promise.all(Array.from({ length: 6 }, () => call(pool)));
    assert.ok(all.every((a) => a.status === 200));
    assert.equal(pool.connections, 6);
    assert.equal(pool.idle, 6);
    await pool.close();
    assert.equal(pool.connections, 0);
    await stop(h.server);
  });

  it('streams request bodies with their Content-Length, or chunked without one', async () => {
    const h = await httpServer(async (q, s) => {
      const parts: Buffer[] = [];
      for await (const c of q) parts.push(c as Buffer);
      s.end(`${q.headers['content-length'] ?? '-'} ${q.headers['transfer-encoding'] ?? '-'} ${Buffer.concat(parts).toString()}`);
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const sized = new PassThrough();
    const p1 = call(pool, req({ method: 'POST', headers: ['Content-Length', '10'], body: sized }));
    sized.write('hello');
    setTimeout(() => sized.end('world'), 10);
    assert.equal((await p1).body, '10 - helloworld');
    const open = new PassThrough();
    const p2 = call(pool, req({ method: 'PUT', body: open }));
    open.write('a');
    open.write(Buffer.alloc(0));
    open.end('bc');
    assert.equal((await p2).body, '- chunked abc');
    assert.equal(h.accepted(), 1, 'both bodies went over one connection');
    await pool.close();
    await stop(h.server);
  });

  it('pushes back on the instance while the handler cannot take more', async () => {
    const big = Buffer.alloc(64 * 1024, 'x');
    const h = await httpServer((_q, s) => {
      let n = 0;
      const more = (): void => {
        while (n < 64) {
          n++;
          if (!s.write(big)) {
            s.once('drain', more);
            return;
          }
        }
        s.end();
      };
      more();
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const c = new Collect(1);
    pool.dispatch(req(), c);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(c.chunks.length, 1, 'nothing after the chunk the handler pushed back on, even from the same read');
    c.resume?.();
    // Resumed once: the handler still says false per chunk, so keep resuming as a drain would.
    const timer = setInterval(() => c.resume?.(), 5);
    const a = await c.done;
    clearInterval(timer);
    assert.equal(a.body.length, 64 * big.length);
    await pool.close();
    await stop(h.server);
  });

  it('times out waiting for the head, and when the body stalls', async () => {
    const h = await httpServer((q, s) => {
      if (q.url === '/stall') {
        s.writeHead(200, { 'content-length': '10' });
        s.write('abc');
      }
      // '/never': no answer at all.
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    await assert.rejects(call(pool, req({ path: '/never', timeoutMs: 150 })), { code: 'UPSTREAM_HEADERS_TIMEOUT', message: /no response head within 0.15 s/ });
    const c = new Collect();
    await assert.rejects(call(pool, req({ path: '/stall', timeoutMs: 150 }), c), { code: 'UPSTREAM_BODY_TIMEOUT' });
    assert.equal(c.status, 200);
    assert.equal(pool.connections, 0, 'timed-out connections are closed');
    await pool.close();
    await stop(h.server);
  });

  it('does not time out while the client is still sending a body the instance is reading', async () => {
    const h = await httpServer(async (q, s) => {
      let n = 0;
      for await (const c of q) n += (c as Buffer).length;
      s.end(String(n));
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const body = new PassThrough();
    const answer = call(pool, req({ method: 'POST', body, timeoutMs: 150 }));
    for (let i = 0; i < 5; i++) {
      body.write('x'.repeat(10));
      await new Promise((r) => setTimeout(r, 80));
    }
    body.end();
    assert.equal((await answer).body, '50', 'a 400 ms upload outlasts a 150 ms timeout');
    await pool.close();
    await stop(h.server);
  });

  it('does not time out a body the handler itself paused', async () => {
    const h = await httpServer((_q, s) => {
      s.writeHead(200, { 'content-length': String(2 * 256 * 1024) });
      s.write(Buffer.alloc(256 * 1024, 'a'));
      s.end(Buffer.alloc(256 * 1024, 'b'));
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const c = new Collect(1);
    pool.dispatch(req({ timeoutMs: 100 }), c);
    await new Promise((r) => setTimeout(r, 350));
    const timer = setInterval(() => c.resume?.(), 5);
    const a = await c.done;
    clearInterval(timer);
    assert.equal(a.body.length, 2 * 256 * 1024);
    await pool.close();
    await stop(h.server);
  });

  it('fails a request whose connection the instance drops, and recovers on a new connection', async () => {
    const h = await httpServer((q, s) => {
      if (q.url === '/crash') {
        s.writeHead(200, { 'content-length': '100' });
        s.write('partial');
        setTimeout(() => q.socket.destroy(), 10);
        return;
      }
      s.end('fine');
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    await assert.rejects(call(pool, req({ path: '/crash' })), { code: 'UPSTREAM_CLOSED' });
    assert.equal((await call(pool)).body, 'fine');
    // The instance closes an idle connection: the pool notices and does not use it.
    h.server.closeIdleConnections();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(pool.connections, 0);
    assert.equal((await call(pool)).body, 'fine');
    await pool.close();
    await stop(h.server);
  });

  it('reports a missing or refusing socket with its errno code', async () => {
    const pool = new WorkerPool({ socketPath: path.join(dir, 'nobody-home.sock') }, { maxIdleMs: 60_000 });
    await assert.rejects(call(pool), { code: 'ENOENT' });
    assert.equal(pool.connections, 0);
    await pool.close();
    const tcp = new WorkerPool({ host: '127.0.0.1', port: 1 }, { maxIdleMs: 60_000 });
    await assert.rejects(call(tcp), { code: 'ECONNREFUSED' });
    await tcp.close();
  });

  it('fails a connect as a connect, with the request body unread, so the whole request can go elsewhere', async () => {
    const body = new PassThrough();
    body.end('all of it');
    const dead = new WorkerPool({ socketPath: path.join(dir, 'nobody-home.sock') }, { maxIdleMs: 60_000 });
    await assert.rejects(call(dead, req({ method: 'POST', headers: ['content-length', '9'], body })), { code: 'ENOENT', syscall: 'connect' });
    assert.equal(body.readableLength, 9, 'nothing of the body was read');
    const { socketPath, server } = await httpServer((q, s) => {
      let got = '';
      q.on('data', (c) => {
        got += c;
      });
      q.on('end', () => s.end(`got ${got}`));
    });
    const live = new WorkerPool({ socketPath }, { maxIdleMs: 60_000 });
    assert.equal((await call(live, req({ method: 'POST', headers: ['content-length', '9'], body }))).body, 'got all of it');
    await live.close();
    await dead.close();
    await stop(server);
  });

  // A listener with a full accept queue drops further SYNs, as an address
  // behind a black-holing firewall does: connect() neither succeeds nor fails.
  const hasPython = spawnSync('python3', ['--version']).status === 0;
  it('gives up on a TCP connect that never completes with ETIMEDOUT', { skip: !hasPython && 'needs python3', timeout: 5_000 }, async () => {
    const code = "import socket,sys\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\nsys.stdin.read()";
    const py = spawn('python3', ['-c', code], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const [line] = (await once(py.stdout!, 'data')) as [Buffer];
      const port = Number(line.toString().trim());
      // Takes the one place in the queue; nothing is ever accepted.
      const filler = net.connect({ host: '127.0.0.1', port });
      await once(filler, 'connect');
      const pool = new WorkerPool({ host: '127.0.0.1', port }, { maxIdleMs: 60_000, connectTimeoutMs: 300 });
      // The request's own timeout is far off: only the connect timeout can end this in time.
      await assert.rejects(call(pool, req({ timeoutMs: 60_000 })), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'ETIMEDOUT');
        assert.match(err.message, new RegExp(`connect to 127.0.0.1:${port} timed out`));
        return true;
      });
      assert.equal(pool.connections, 0);
      filler.destroy();
      await pool.close();
    } finally {
      py.kill();
    }
  });

  it('talks HTTP over TCP with the host and port in Host', async () => {
    const server = http.createServer((q, s) => s.end(q.headers.host));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as net.AddressInfo).port;
    const pool = new WorkerPool({ host: '127.0.0.1', port }, { maxIdleMs: 60_000 });
    assert.equal((await call(pool)).body, `127.0.0.1:${port}`);
    await pool.close();
    await stop(server);
  });

  it('honours the instance keep-alive hint and never reuses a connection it would close', async () => {
    const r = await rawServer((sock) => sock.write('HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1\r\nContent-Length: 2\r\n\r\nok'));
    const pool = new WorkerPool({ socketPath: r.socketPath }, { maxIdleMs: 60_000 });
    for (let i = 0; i < 3; i++) assert.equal((await call(pool)).body, 'ok');
    assert.equal(r.accepted(), 3, 'a 1 s hint leaves no safe time to reuse');
    await pool.close();
    await stop(r.server);
  });

  it('closes connections idle longer than maxIdleMs', async () => {
    const h = await httpServer((_q, s) => s.end('x'));
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 50 });
    await call(pool);
    assert.equal(pool.idle, 1);
    await new Promise((r) => setTimeout(r, 80));
    pool.closeExpired();
    assert.equal(pool.connections, 0);
    await call(pool);
    assert.equal(h.accepted(), 2);
    await pool.close();
    await stop(h.server);
  });

  it('does not reuse a connection after Connection: close, a read-until-close body or trailing bytes', async () => {
    const replies = [
      'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na',
      'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nbJUNK',
      'HTTP/1.0 200 OK\r\n\r\nuntil-close',
    ];
    let i = 0;
    // The server keeps every connection open, except after the body that only its close can end.
    const r = await rawServer((sock) => {
      const n = i++;
      if (n === 2) sock.end(replies[n]);
      else sock.write(replies[n]);
    });
    const pool = new WorkerPool({ socketPath: r.socketPath }, { maxIdleMs: 60_000 });
    assert.equal((await call(pool)).body, 'a');
    assert.equal((await call(pool)).body, 'b');
    assert.equal((await call(pool)).body, 'until-close');
    assert.equal(r.accepted(), 3);
    await pool.close();
    await stop(r.server);
  });

  it('turns a malformed response into UPSTREAM_BAD_RESPONSE and drops the connection', async () => {
    const r = await rawServer((sock) => sock.write('SMTP ready\r\n\r\n'));
    const pool = new WorkerPool({ socketPath: r.socketPath }, { maxIdleMs: 60_000 });
    await assert.rejects(call(pool), { code: 'UPSTREAM_BAD_RESPONSE', message: /status line/ });
    assert.equal(pool.connections, 0);
    await pool.close();
    await stop(r.server);
  });

  it('refuses a header value with a line break before writing anything, keeping the connection', async () => {
    const h = await httpServer((_q, s) => s.end('x'));
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    await call(pool);
    await assert.rejects(call(pool, req({ headers: ['X-Evil', 'a\r\nInjected: yes'] })), { code: 'UPSTREAM_BAD_REQUEST', message: /X-Evil/ });
    // Written as latin1, U+010A would become a bare LF.
    await assert.rejects(call(pool, req({ headers: ['X-Wide', 'a\u010ab'] })), { code: 'UPSTREAM_BAD_REQUEST', message: /X-Wide/ });
    await assert.rejects(call(pool, req({ headers: ['Bad Name', 'v'] })), { code: 'UPSTREAM_BAD_REQUEST', message: /not a token/ });
    await assert.rejects(call(pool, req({ path: '/a b HTTP/1.1\r\nX: y' })), { code: 'UPSTREAM_BAD_REQUEST', message: /path/ });
    assert.equal((await call(pool)).body, 'x');
    assert.equal(h.accepted(), 1);
    await pool.close();
    await stop(h.server);
  });

  it('closes the connection when the instance answers before reading the whole body, and drains the body', async () => {
    const h = await httpServer((_q, s) => {
      s.writeHead(413, { 'content-length': '3' });
      s.end('big');
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const body = new PassThrough();
    body.write('start');
    const a = await call(pool, req({ method: 'POST', body }));
    assert.equal(a.status, 413);
    assert.equal(pool.connections, 0);
    // The rest of the client's body still flows (and is dropped) rather than stalling its connection.
    body.end(Buffer.alloc(1024 * 1024));
    await once(body, 'end');
    await pool.close();
    await stop(h.server);
  });

  it('ends a request with the error given to abort, once', async () => {
    const h = await httpServer(() => {});
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const c = new Collect();
    pool.dispatch(req(), c);
    c.abort?.(new Error('client went away'));
    c.abort?.(new Error('twice'));
    await assert.rejects(c.done, /client went away/);
    assert.equal(c.calls, 1);
    assert.equal(pool.connections, 0);
    await pool.close();
    await stop(h.server);
  });

  it('close() lets requests in flight finish; destroy() fails them', async () => {
    const h = await httpServer((q, s) => setTimeout(() => s.end(q.url), 100));
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const inFlight = call(pool, req({ path: '/slow' }));
    await new Promise((r) => setTimeout(r, 20));
    const closed = pool.close();
    await assert.rejects(call(pool), { code: 'UPSTREAM_DESTROYED' });
    assert.equal((await inFlight).body, '/slow');
    await closed;
    assert.equal(pool.connections, 0);

    const pool2 = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const doomed = call(pool2);
    await new Promise((r) => setTimeout(r, 20));
    await pool2.destroy();
    await assert.rejects(doomed, { code: 'UPSTREAM_DESTROYED' });
    await stop(h.server);
  });

  it('reads chunked responses and HEAD answers from node:http', async () => {
    const h = await httpServer((_q, s) => {
      s.setHeader('content-type', 'text/plain');
      s.write('one ');
      s.end('two');
    });
    const pool = new WorkerPool({ socketPath: h.socketPath }, { maxIdleMs: 60_000 });
    const a = await call(pool);
    assert.equal(a.body, 'one two');
    assert.ok(a.headers.some((v) => v.toLowerCase() === 'transfer-encoding'));
    const head = await call(pool, req({ method: 'HEAD' }));
    assert.equal(head.body, '');
    assert.equal((await call(pool)).body, 'one two');
    assert.equal(h.accepted(), 1);
    await pool.close();
    await stop(h.server);
  });
});
