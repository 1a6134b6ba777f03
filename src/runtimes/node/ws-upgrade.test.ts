// WebSocket functions end to end: the real worker, specialized with a
// function written as for Fission (`(ws, clients)`), and Node's own
// WebSocket client (through a TCP proxy to the worker's Unix socket) or a
// raw socket where the bytes themselves matter.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type RunningRuntime, startRuntime, tcpProxy } from './testing.ts';
import { eventually } from '../../testing/eventually.ts';
import { clientFrame, closeOf, rawUpgrade } from './ws-testing.ts';

const MIB = 1024 * 1024;
/** A regression that leaves a wait unanswered fails its own test instead of hanging the run. */
const BOUNDED = { timeout: 20_000 };
const TEXT = 0x1;
const CLOSE = 0x8;

// Two declared parameters, which an HTTP handler would have called as
// (context, callback): the WebSocket call must not care. The upgrade request
// is the third argument.
const FUNCTION = `
module.exports = function (ws, clients) {
  const url = arguments[2].url;
  if (url === '/throw') throw new Error('boom-ws-sync');
  if (url === '/reject') return Promise.reject(new Error('boom-ws-async'));
  ws.on('close', (code, reason) => console.log('closed ' + url + ' ' + code + ' ' + reason.toString()));
  ws.on('message', (data, isBinary) => {
    const text = isBinary ? '' : data.toString();
    if (text === 'protocol') return ws.send('protocol=' + ws.protocol);
    if (text === 'close-me') return ws.close(4001, 'bye');
    if (text === 'throw') throw new Error('boom-ws-listener');
    if (text.startsWith('all:')) {
      for (const c of clients) if (c.readyState === ws.OPEN) c.send(clients.size + ' ' + text.slice(4));
      return;
    }
    ws.send(data, { binary: isBinary });
  });
};`;

type Received = string | Buffer;
interface Closed {
  code: number;
  reason: string;
  wasClean: boolean;
}

/** Node's WebSocket with its messages queued and its close as a promise. */
class Client {
  readonly ws: WebSocket;
  readonly opened: Promise<void>;
  readonly closed: Promise<Closed>;
  readonly #queue: Received[] = [];
  #wake: (() => void) | undefined;
  #isClosed = false;

  constructor(url: string, protocols?: string[]) {
    const ws = new WebSocket(url, protocols);
    this.ws = ws;
    ws.binaryType = 'arraybuffer';
    this.opened = new Promise((resolve, reject) => {
      ws.addEventListener('open', () => resolve());
      ws.addEventListener('close', (e) => reject(new Error(`closed before it opened: ${e.code}`)));
    });
    this.closed = new Promise((resolve) => {
      ws.addEventListener('close', (e) => {
        this.#isClosed = true;
        this.#wake?.();
        resolve({ code: e.code, reason: e.reason, wasClean: e.wasClean });
      });
    });
    ws.addEventListener('message', (e) => {
      this.#queue.push(typeof e.data === 'string' ? e.data : Buffer.from(e.data as ArrayBuffer));
      this.#wake?.();
    });
  }

  async next(): Promise<Received> {
    while (this.#queue.length === 0) {
      if (this.#isClosed) throw new Error('closed while waiting for a message');
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
    return this.#queue.shift()!;
  }
}

let rt: RunningRuntime;
let proxy: Awaited<ReturnType<typeof tcpProxy>>;
const clients: Client[] = [];

async function open(url: string, protocols?: string[]): Promise<Client> {
  const c = new Client(url, protocols);
  clients.push(c);
  await c.opened;
  return c;
}

const connect = (urlPath: string, protocols?: string[]) => open(`ws://127.0.0.1:${proxy.port}${urlPath}`, protocols);

async function specialized(env: Record<string, string> = {}): Promise<RunningRuntime> {
  const r = await startRuntime(env);
  const dir = r.write({ deployarchive: FUNCTION });
  const s = await r.specialize({ filepath: path.join(dir, 'deployarchive') });
  assert.equal(s.status, 200, `${s.text}\n${r.stderr()}`);
  return r;
}

/** A specialized worker of the test's own, reachable at `url` (ws://...). */
async function withRuntime(env: Record<string, string>, use: (r: RunningRuntime, url: string) => Promise<void>): Promise<void> {
  const r = await specialized(env);
  const p = await tcpProxy(r.socket);
  try {
    await use(r, `ws://127.0.0.1:${p.port}`);
  } finally {
    p.close();
    await r.stop();
  }
}

before(async () => {
  rt = await specialized({ FLINT_MAX_BODY_BYTES: String(MIB) });
  proxy = await tcpProxy(rt.socket);
});
after(async () => {
  for (const c of clients) c.ws.close();
  proxy?.close();
  await rt?.stop();
});

describe('node runtime: WebSocket functions', () => {
  it('echo text and binary messages, small and large', BOUNDED, async () => {
    const c = await connect('/echo');
    c.ws.send('héllo ✓');
    assert.equal(await c.next(), 'héllo ✓');
    c.ws.send(new Uint8Array([0, 1, 2, 255]));
    assert.deepEqual([...((await c.next()) as Buffer)], [0, 1, 2, 255]);
    const big = Buffer.alloc(300_000);
    for (let i = 0; i < big.length; i++) big[i] = i % 251;
    c.ws.send(big);
    assert.ok(((await c.next()) as Buffer).equals(big));
    const text = 'ü'.repeat(40_000);
    c.ws.send(text);
    assert.equal(await c.next(), text);
  });

  it('broadcast through clients reaches every open WebSocket; a closed one leaves the set', BOUNDED, async () => {
    // A worker of its own, so no other test's connections count.
    await withRuntime({}, async (r, url) => {
      const a = await open(`${url}/room-a`);
      const b = await open(`${url}/room-b`);
      a.ws.send('all:hi');
      assert.equal(await a.next(), '2 hi');
      assert.equal(await b.next(), '2 hi');
      b.ws.close(1000);
      await b.closed;
      await eventually(() => r.stdout().includes('closed /room-b 1000'), "the function's close listener");
      a.ws.send('all:again');
      assert.equal(await a.next(), '1 again');
    });
  });

  it('selects the first subprotocol offered, and none when none is offered', BOUNDED, async () => {
    const c = await connect('/proto', ['chat.v2', 'chat.v1']);
    assert.equal(c.ws.protocol, 'chat.v2');
    c.ws.send('protocol');
    assert.equal(await c.next(), 'protocol=chat.v2');
    const plain = await connect('/proto');
    assert.equal(plain.ws.protocol, '');
    plain.ws.send('protocol');
    assert.equal(await plain.next(), 'protocol=');
  });

  it("close started by the function: the client sees the function's code and reason", BOUNDED, async () => {
    const c = await connect('/server-closes');
    c.ws.send('close-me');
    assert.deepEqual(await c.closed, { code: 4001, reason: 'bye', wasClean: true });
    await eventually(() => rt.stdout().includes('closed /server-closes 4001'), "the function's close listener");
  });

  it("close started by the client: the function sees the client's code and reason", BOUNDED, async () => {
    const c = await connect('/client-closes');
    c.ws.close(4000, 'done ✓');
    const closed = await c.closed;
    assert.equal(closed.code, 4000);
    assert.equal(closed.wasClean, true);
    await eventually(() => rt.stdout().includes('closed /client-closes 4000 done ✓'), "the function's close listener");
  });

  it('a message over the body limit (FLINT_MAX_BODY_BYTES) closes with 1009', BOUNDED, async () => {
    const c = await connect('/too-big');
    c.ws.send(Buffer.alloc(MIB + 1));
    assert.equal((await c.closed).code, 1009);
  });

  it('a function that throws or rejects: close 1011, its stack in the function log', BOUNDED, async () => {
    const sync = await connect('/throw');
    assert.equal((await sync.closed).code, 1011);
    const rejected = await connect('/reject');
    assert.equal((await rejected.closed).code, 1011);
    await eventually(() => /function error: Error: boom-ws-sync\n\s+at /.test(rt.stderr()), 'the thrown error on stderr');
    await eventually(() => /function error: Error: boom-ws-async\n\s+at /.test(rt.stderr()), 'the rejection on stderr');
  });

  it("a throw in the function's listener closes that connection with 1011; the worker and its other connections go on", BOUNDED, async () => {
    const bystander = await connect('/bystander');
    const thrower = await connect('/thrower');
    thrower.ws.send('throw');
    assert.equal((await thrower.closed).code, 1011);
    await eventually(() => /function error: Error: boom-ws-listener\n\s+at /.test(rt.stderr()), 'the error on stderr');
    bystander.ws.send('still');
    assert.equal(await bystander.next(), 'still');
    assert.equal((await rt.request('/healthz')).status, 200);
  });

  it('serves a plain request that offers h2c as the plain request it also is', BOUNDED, async () => {
    const offer = await rt.request('/plain', { headers: { connection: 'Upgrade, HTTP2-Settings', upgrade: 'h2c', 'http2-settings': 'AAMAAABkAAQCAAAAAAIAAAAA', 'x-flint-function-name': 'f' } });
    const plain = await rt.request('/plain', { headers: { 'x-flint-function-name': 'f' } });
    // This function is written for WebSockets, so as HTTP it fails; the point is that both fail alike.
    assert.equal(offer.status, plain.status, offer.text);
    assert.doesNotMatch(offer.text, /Upgrade/);
  });

  it('control routes answer as before while WebSockets are open', BOUNDED, async () => {
    await connect('/open');
    const health = await rt.request('/healthz');
    assert.equal(health.status, 200);
    assert.equal((await rt.specialize({ filepath: '/x' })).status, 400, 'already specialized');
  });
});

describe('node runtime: the WebSocket handshake on the wire', () => {
  it("answers with RFC 6455's accept value and reads frames sent along with the request", BOUNDED, async () => {
    // The key and accept value of RFC 6455 section 1.3.
    const peer = rawUpgrade(rt.socket, {
      path: '/raw',
      headers: { 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-protocol': 'b1, b2' },
      after: clientFrame(TEXT, 'in the same packet'),
    });
    const head = await peer.head();
    assert.equal(head.status, 101);
    assert.equal(head.headers['sec-websocket-accept'], 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
    assert.equal(head.headers.upgrade.toLowerCase(), 'websocket');
    assert.equal(head.headers.connection.toLowerCase(), 'upgrade');
    assert.equal(head.headers['sec-websocket-protocol'], 'b1');
    assert.equal(head.headers['sec-websocket-extensions'], undefined, 'no extension is negotiated');
    const echo = await peer.frame();
    assert.deepEqual([echo.opcode, echo.masked, echo.payload.toString()], [TEXT, false, 'in the same packet']);
    peer.send(clientFrame(TEXT, 'unmasked', { mask: false }));
    const close = await peer.frame();
    assert.equal(close.opcode, CLOSE);
    assert.equal(closeOf(close).code, 1002);
    await peer.closed();
  });

  const bad: [string, Parameters<typeof rawUpgrade>[1], number, RegExp][] = [
    ['a missing key', { headers: { 'sec-websocket-key': undefined } }, 400, /missing Sec-WebSocket-Key/],
    ['a key that is not 16 bytes', { headers: { 'sec-websocket-key': Buffer.alloc(8).toString('base64') } }, 400, /invalid Sec-WebSocket-Key/],
    ['version 8', { headers: { 'sec-websocket-version': '8' } }, 426, /Sec-WebSocket-Version '8'/],
    ['a missing version', { headers: { 'sec-websocket-version': undefined } }, 400, /missing Sec-WebSocket-Version/],
    ['a POST', { method: 'POST', headers: { 'content-length': '0' } }, 400, /must be a GET/],
    ['an invalid subprotocol', { headers: { 'sec-websocket-protocol': 'a b' } }, 400, /Sec-WebSocket-Protocol/],
    // These two pass the runtime's own checks and are refused by ws's.
    ['a subprotocol offered twice', { headers: { 'sec-websocket-protocol': 'a, a' } }, 400, /Sec-WebSocket-Protocol/],
    ['an Upgrade list', { headers: { upgrade: 'websocket, foo' } }, 400, /Upgrade/],
  ];
  for (const [what, opts, status, error] of bad) {
    it(`refuses ${what} with ${status} and a JSON error, then closes`, BOUNDED, async () => {
      const peer = rawUpgrade(rt.socket, opts);
      const head = await peer.head();
      assert.equal(head.status, status);
      assert.match(head.headers['content-type'], /^application\/json/);
      if (status === 426) assert.equal(head.headers['sec-websocket-version'], '13');
      assert.match(JSON.parse(await peer.body()).error, error);
    });
  }
});

describe('node runtime: WebSockets and the worker lifecycle', () => {
  it('a generic worker answers an upgrade with 503, as any request, and closes', BOUNDED, async () => {
    const generic = await startRuntime();
    try {
      const peer = rawUpgrade(generic.socket);
      assert.equal((await peer.head()).status, 503);
      assert.match(JSON.parse(await peer.body()).error, /Generic container/);
    } finally {
      await generic.stop();
    }
  });

  it('SIGTERM sends open WebSockets 1001 and the worker exits without waiting out its grace', BOUNDED, async () => {
    // A grace longer than the test's timeout: only closing the WebSockets lets it exit in time.
    await withRuntime({ FLINT_SHUTDOWN_GRACE_MS: '600000' }, async (r, url) => {
      const c = await open(`${url}/leaving`);
      r.child.kill('SIGTERM');
      const closed = await c.closed;
      assert.equal(closed.code, 1001);
      assert.equal(closed.wasClean, true);
      assert.equal(await r.exited, 0);
    });
  });
});
