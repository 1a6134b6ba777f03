// A function's WebSocket (ws's, as websocket.ts sets it up) over a real TCP
// connection, with the test as a raw client: the frames it sends, the
// closing handshake, what a client may and may not send, and the limits
// that keep one connection's troubles its own.
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import type net from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { acceptWebSocket, createWebSocketServer, type FunctionWebSocket, type WebSocketServerOptions } from './websocket.ts';
import { clientFrame, closeBody, closeOf, hugeHeader, OP, type RawPeer, rawUpgrade } from './ws-testing.ts';

const { CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG } = OP;
const MIB = 1024 * 1024;
/** A regression that leaves a wait unanswered fails its own test instead of hanging the run. */
const BOUNDED = { timeout: 20_000 };

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

interface Message {
  data: Buffer;
  isBinary: boolean;
}

interface Pair {
  ws: FunctionWebSocket;
  peer: RawPeer;
  /** The next message the server's WebSocket emits. */
  next(): Promise<Message>;
  /** What it has emitted and next() has not taken. */
  pending: Message[];
  closed: Promise<{ code: number; reason: string }>;
}

interface PairOptions extends Partial<WebSocketServerOptions> {
  /** Handshake headers for the client (undefined leaves one out). */
  headers?: Record<string, string | undefined>;
  /** Bytes sent in the same packet as the upgrade request. */
  after?: Buffer;
  /** The server echoes every message, as a function might. */
  echo?: boolean;
}

/** A connected pair: the server's WebSocket and the test's raw client. */
async function pair(opts: PairOptions = {}): Promise<Pair> {
  const wss = createWebSocketServer({ maxPayload: opts.maxPayload ?? 16 * MIB, closeTimeoutMs: opts.closeTimeoutMs });
  const server = http.createServer();
  const pending: Message[] = [];
  let wake: (() => void) | undefined;
  let resolveOpen: (p: Omit<Pair, 'peer' | 'next' | 'pending'>) => void;
  const opened = new Promise<Omit<Pair, 'peer' | 'next' | 'pending'>>((resolve) => {
    resolveOpen = resolve;
  });
  server.on('upgrade', (req, socket, head) =>
    acceptWebSocket(wss, req, socket, head, (ws) => {
      // Listening at once: frames that came with the request are read right after.
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        pending.push({ data, isBinary });
        if (opts.echo) ws.send(data, { binary: isBinary });
        wake?.();
      });
      const closed = new Promise<{ code: number; reason: string }>((resolve) => {
        ws.on('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString() }));
      });
      resolveOpen({ ws, closed });
    }),
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const peer = rawUpgrade({ host: '127.0.0.1', port }, { headers: opts.headers, after: opts.after });
  cleanups.push(() => {
    peer.socket.destroy();
    server.close();
  });
  assert.equal((await peer.head()).status, 101);
  const { ws, closed } = await opened;
  cleanups.push(() => ws.terminate());
  const next = async (): Promise<Message> => {
    while (pending.length === 0) {
      if (ws.readyState === WebSocket.CLOSED) throw new Error('closed while waiting for a message');
      await new Promise<void>((resolve) => {
        wake = resolve;
        ws.once('close', resolve);
      });
    }
    return pending.shift()!;
  };
  return { ws, peer, next, pending, closed };
}

/** The close code the server answers `bytes` with. */
async function closeCodeFor(bytes: Buffer, opts: PairOptions = {}): Promise<number> {
  const { peer } = await pair(opts);
  peer.send(bytes);
  for (;;) {
    const f = await peer.frame();
    if (f.opcode === CLOSE) return closeOf(f).code;
  }
}

describe('websocket: sending', () => {
  it('sends strings as text and everything else as binary, unless options.binary says otherwise', BOUNDED, async () => {
    const { ws, peer } = await pair();
    const sent: (Error | null | undefined)[] = [];
    ws.send('héllo', (err) => sent.push(err));
    ws.send(Buffer.from([1, 2]));
    ws.send(Buffer.from('as text'), { binary: false });
    ws.send('as binary', { binary: true });
    ws.send(new Uint8Array([3, 4]).buffer);
    ws.send(new Uint16Array(new Uint16Array([0xffff, 0x0102, 0xffff]).buffer, 2, 1));
    ws.send(new DataView(new Uint8Array([5, 6, 7]).buffer, 1, 2));
    ws.send(42);
    const want: [number, string][] = [
      [TEXT, Buffer.from('héllo').toString('hex')],
      [BINARY, '0102'],
      [TEXT, Buffer.from('as text').toString('hex')],
      [BINARY, Buffer.from('as binary').toString('hex')],
      [BINARY, '0304'],
      [BINARY, Buffer.from(new Uint16Array([0x0102]).buffer).toString('hex')],
      [BINARY, '0607'],
      [TEXT, Buffer.from('42').toString('hex')],
    ];
    for (const [opcode, hex] of want) {
      const f = await peer.frame();
      assert.deepEqual([f.opcode, f.payload.toString('hex'), f.fin, f.masked, f.rsv], [opcode, hex, true, false, 0]);
    }
    assert.equal(sent.length, 1);
    assert.ok(!sent[0], `the callback got ${sent[0]}`);
    const notData: any = { not: 'data' };
    assert.throws(() => ws.send(notData), TypeError);
  });

  it('sends 16-bit and 64-bit lengths intact', BOUNDED, async () => {
    const { ws, peer } = await pair();
    const mid = Buffer.alloc(40_000, 'm');
    const big = Buffer.alloc(300_000);
    for (let i = 0; i < big.length; i++) big[i] = i % 253;
    ws.send(mid);
    ws.send(big);
    assert.ok((await peer.frame()).payload.equals(mid));
    assert.ok((await peer.frame()).payload.equals(big));
  });

  it('sends a fragmented message with fin: false', BOUNDED, async () => {
    const { ws, peer } = await pair();
    ws.send('a', { fin: false });
    ws.send('b', { fin: false });
    ws.send('c');
    ws.send('d');
    const frames = [await peer.frame(), await peer.frame(), await peer.frame(), await peer.frame()];
    assert.deepEqual(
      frames.map((f) => [f.opcode, f.fin, f.payload.toString()]),
      [
        [TEXT, false, 'a'],
        [CONTINUATION, false, 'b'],
        [CONTINUATION, true, 'c'],
        [TEXT, true, 'd'],
      ],
    );
  });

  it('has the ws readyState constants, the selected protocol, no extensions and bufferedAmount', BOUNDED, async () => {
    const { ws, peer } = await pair({ headers: { 'sec-websocket-protocol': 'chat, other', 'sec-websocket-extensions': 'permessage-deflate' } });
    const head = await peer.head();
    assert.equal(head.headers['sec-websocket-protocol'], 'chat');
    assert.equal(head.headers['sec-websocket-extensions'], undefined, 'no compression is negotiated');
    assert.deepEqual([WebSocket.CONNECTING, WebSocket.OPEN, WebSocket.CLOSING, WebSocket.CLOSED], [0, 1, 2, 3]);
    assert.deepEqual([ws.CONNECTING, ws.OPEN, ws.CLOSING, ws.CLOSED], [0, 1, 2, 3]);
    assert.equal(ws.readyState, WebSocket.OPEN);
    assert.equal(ws.protocol, 'chat');
    assert.equal(ws.extensions, '');
    assert.equal(typeof ws.bufferedAmount, 'number');
  });
});

describe('websocket: receiving', () => {
  it('emits messages with isBinary, also from the bytes read with the handshake', BOUNDED, async () => {
    const { peer, next } = await pair({ after: clientFrame(TEXT, 'from the head') });
    assert.deepEqual(await next(), { data: Buffer.from('from the head'), isBinary: false });
    peer.send(clientFrame(BINARY, Buffer.from([7])));
    const second = await next();
    assert.deepEqual([[...second.data], second.isBinary], [[7], true]);
  });

  it('answers a ping with a pong of the same data and emits ping and pong', BOUNDED, async () => {
    const { ws, peer } = await pair();
    const pinged = once(ws, 'ping');
    peer.send(clientFrame(PING, 'are you there'));
    const pong = await peer.frame();
    assert.deepEqual([pong.opcode, pong.payload.toString()], [PONG, 'are you there']);
    assert.equal(((await pinged)[0] as Buffer).toString(), 'are you there');
    const ponged = once(ws, 'pong');
    ws.ping('hb');
    const ping = await peer.frame();
    assert.deepEqual([ping.opcode, ping.payload.toString()], [PING, 'hb']);
    peer.send(clientFrame(PONG, 'hb'));
    assert.equal(((await ponged)[0] as Buffer).toString(), 'hb');
    assert.throws(() => ws.ping(Buffer.alloc(126)), RangeError);
  });

  it('reads 7-bit, 16-bit and 64-bit lengths, also a 64-bit length for a short payload', BOUNDED, async () => {
    const { peer, next } = await pair();
    for (const size of [0, 125, 126, 65535, 65536, 200_000]) {
      const payload = Buffer.alloc(size, 'x');
      for (let i = 0; i < size; i += 997) payload[i] = i % 251;
      peer.send(clientFrame(BINARY, payload));
      assert.ok((await next()).data.equals(payload), `the bytes of a ${size}-byte message`);
    }
    peer.send(clientFrame(TEXT, 'short', { lengthBits: 64 }));
    assert.equal((await next()).data.toString(), 'short');
    peer.send(clientFrame(TEXT, 'short', { lengthBits: 16 }));
    assert.equal((await next()).data.toString(), 'short');
  });

  it('reassembles a fragmented message, with control frames between the fragments', BOUNDED, async () => {
    const { ws, peer, next } = await pair();
    const pings: string[] = [];
    ws.on('ping', (d: Buffer) => pings.push(d.toString()));
    peer.send(
      Buffer.concat([
        clientFrame(TEXT, 'frag', { fin: false }),
        clientFrame(PING, 'p1'),
        clientFrame(CONTINUATION, 'men', { fin: false }),
        clientFrame(PONG, 'p2'),
        clientFrame(CONTINUATION, 'ted'),
        clientFrame(BINARY, Buffer.from([9]), { fin: false }),
        clientFrame(CONTINUATION, Buffer.from([8])),
      ]),
    );
    assert.deepEqual(await next(), { data: Buffer.from('fragmented'), isBinary: false });
    assert.deepEqual(await next(), { data: Buffer.from([9, 8]), isBinary: true });
    const pong = await peer.frame();
    assert.deepEqual([pong.opcode, pong.payload.toString()], [PONG, 'p1'], 'the ping between fragments is answered');
    assert.deepEqual(pings, ['p1']);
  });

  it('accepts a UTF-8 character split across fragments, and empty fragments', BOUNDED, async () => {
    const { peer, next } = await pair();
    const check = Buffer.from('✓');
    peer.send(
      Buffer.concat([
        clientFrame(TEXT, check.subarray(0, 1), { fin: false }),
        clientFrame(CONTINUATION, '', { fin: false }),
        clientFrame(CONTINUATION, check.subarray(1)),
        clientFrame(TEXT, ''),
      ]),
    );
    assert.equal((await next()).data.toString(), '✓');
    assert.equal((await next()).data.toString(), '');
  });

  it('gives the same messages when the bytes arrive a few at a time', BOUNDED, async () => {
    const { peer, next } = await pair();
    const stream = Buffer.concat([
      clientFrame(TEXT, 'one'),
      clientFrame(TEXT, 'two-', { fin: false }),
      clientFrame(PING, 'ping!'),
      clientFrame(CONTINUATION, 'parts'),
      clientFrame(BINARY, Buffer.alloc(300, 7)),
      clientFrame(TEXT, 'after 16', { lengthBits: 16 }),
    ]);
    for (let i = 0; i < stream.length; i += 3) {
      peer.send(stream.subarray(i, i + 3));
      // Each piece its own write, so the server's reads end inside headers and payloads.
      await new Promise((r) => setImmediate(r));
    }
    const got = [await next(), await next(), await next(), await next()];
    assert.deepEqual(
      got.map((m) => (m.isBinary ? `binary ${m.data.length}` : m.data.toString())),
      ['one', 'two-parts', 'binary 300', 'after 16'],
    );
  });
});

describe('websocket: closing', () => {
  it('server-initiated: sends the close frame, waits for the peer, then ends the connection', BOUNDED, async () => {
    const { ws, peer, closed, next } = await pair();
    ws.close(4000, 'bye');
    assert.equal(ws.readyState, WebSocket.CLOSING);
    const f = await peer.frame();
    assert.equal(f.opcode, CLOSE);
    assert.deepEqual(closeOf(f), { code: 4000, reason: 'bye' });
    assert.equal(peer.ended, false, 'the connection stays until the peer answers');
    // Messages still arrive while closing.
    peer.send(clientFrame(TEXT, 'late'));
    assert.equal((await next()).data.toString(), 'late');
    peer.send(clientFrame(CLOSE, closeBody(4000, 'ok')));
    await peer.closed();
    assert.deepEqual(await closed, { code: 4000, reason: 'ok' });
    assert.equal(ws.readyState, WebSocket.CLOSED);
  });

  it('client-initiated: echoes the code, ends the connection, reports the code and reason, and reads nothing after', BOUNDED, async () => {
    const { ws, peer, closed, pending } = await pair();
    peer.send(Buffer.concat([clientFrame(CLOSE, closeBody(4100, 'done ✓')), clientFrame(TEXT, 'ignored')]));
    const f = await peer.frame();
    assert.equal(f.opcode, CLOSE);
    assert.equal(closeOf(f).code, 4100);
    await peer.closed();
    assert.deepEqual(await closed, { code: 4100, reason: 'done ✓' });
    assert.equal(ws.readyState, WebSocket.CLOSED);
    assert.deepEqual(pending, [], 'a message after the close frame');
  });

  it('an empty close frame is answered with an empty one and reported as 1005', BOUNDED, async () => {
    const { peer, closed } = await pair();
    peer.send(clientFrame(CLOSE));
    const f = await peer.frame();
    assert.deepEqual([f.opcode, f.payload.length], [CLOSE, 0]);
    assert.equal((await closed).code, 1005);
  });

  it('takes every close code that may travel on the wire', BOUNDED, async () => {
    for (const code of [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999]) {
      const { peer, closed } = await pair();
      peer.send(clientFrame(CLOSE, closeBody(code)));
      assert.equal((await closed).code, code);
    }
  });

  it('cuts the connection when the peer never answers the close frame (close timeout)', BOUNDED, async () => {
    const { ws, peer, closed } = await pair({ closeTimeoutMs: 50 });
    ws.close(1000);
    assert.equal((await peer.frame()).opcode, CLOSE);
    assert.equal((await closed).code, 1006);
    await peer.closed();
  });

  it('terminate() cuts the connection at once and reports 1006', BOUNDED, async () => {
    const { ws, peer, closed } = await pair();
    ws.terminate();
    await peer.closed();
    assert.equal((await closed).code, 1006);
    assert.equal(ws.readyState, WebSocket.CLOSED);
  });

  it('a peer that disappears without a close frame is reported as 1006', BOUNDED, async () => {
    const { peer, closed } = await pair();
    peer.socket.end();
    assert.equal((await closed).code, 1006);
  });

  it('sending after close reaches the callback as an error, never a throw', BOUNDED, async () => {
    const { ws, closed } = await pair({ closeTimeoutMs: 50 });
    ws.close();
    const err = await new Promise<Error | null | undefined>((resolve) => ws.send('x', resolve));
    assert.match(String(err?.message), /not open.*CLOSING/);
    await closed;
    const after = await new Promise<Error | null | undefined>((resolve) => ws.ping(undefined, undefined, resolve));
    assert.match(String(after?.message), /not open.*CLOSED/);
    ws.close(1000);
    ws.terminate();
  });

  it('refuses close codes that may not be sent and over-long reasons', BOUNDED, async () => {
    const { ws } = await pair();
    for (const code of [999, 1004, 1005, 1006, 1015, 5000]) assert.throws(() => ws.close(code), TypeError, `code ${code}`);
    assert.throws(() => ws.close(1000, 'x'.repeat(124)), RangeError);
    assert.equal(ws.readyState, WebSocket.OPEN, 'a refused close() changes nothing');
    ws.close(1000, 'x'.repeat(123));
    assert.equal(ws.readyState, WebSocket.CLOSING);
  });
});

describe('websocket: a client that breaks the protocol', () => {
  it('gets a close frame with the code; error listeners hear of it', BOUNDED, async () => {
    const { ws, peer, closed } = await pair();
    const errored = once(ws, 'error');
    peer.send(clientFrame(TEXT, 'unmasked', { mask: false }));
    const f = await peer.frame();
    assert.equal(f.opcode, CLOSE);
    assert.equal(closeOf(f).code, 1002);
    const [err] = (await errored) as [Error & { code: string }];
    assert.equal(err.code, 'WS_ERR_EXPECTED_MASK');
    await peer.closed();
    assert.equal((await closed).code, 1006, 'no close frame came from the peer');
  });

  it("does not throw when nobody listens for errors, nor count the client's fault as the function's", BOUNDED, async (t) => {
    const { ws, peer, closed } = await pair({ maxPayload: 10 });
    assert.equal(ws.listenerCount('error'), 0);
    const stderr = t.mock.method(process.stderr, 'write');
    peer.send(clientFrame(BINARY, Buffer.alloc(11)));
    const f = await peer.frame();
    assert.equal(closeOf(f).code, 1009);
    await closed;
    const written = stderr.mock.calls.map((c) => String(c.arguments[0]));
    assert.deepEqual(
      written.filter((line) => line.includes('function error')),
      [],
    );
  });

  const cases: [string, Buffer, number][] = [
    ['an unmasked frame', clientFrame(TEXT, 'x', { mask: false }), 1002],
    ['RSV1 set (no compression was negotiated)', clientFrame(TEXT, 'x', { rsv: 4 }), 1002],
    ['RSV2 set', clientFrame(TEXT, 'x', { rsv: 2 }), 1002],
    ['RSV3 set', clientFrame(TEXT, 'x', { rsv: 1 }), 1002],
    ['opcode 0x3', clientFrame(0x3, 'x'), 1002],
    ['opcode 0x7', clientFrame(0x7, 'x'), 1002],
    ['opcode 0xb', clientFrame(0xb, 'x'), 1002],
    ['opcode 0xf', clientFrame(0xf, 'x'), 1002],
    ['a fragmented ping', clientFrame(PING, 'x', { fin: false }), 1002],
    ['a fragmented close', clientFrame(CLOSE, closeBody(1000), { fin: false }), 1002],
    ['a ping over 125 bytes', clientFrame(PING, Buffer.alloc(126)), 1002],
    ['a pong over 125 bytes', clientFrame(PONG, Buffer.alloc(200)), 1002],
    ['a continuation without a message', clientFrame(CONTINUATION, 'x'), 1002],
    ['a text frame inside a fragmented message', Buffer.concat([clientFrame(TEXT, 'a', { fin: false }), clientFrame(TEXT, 'b')]), 1002],
    ['a binary frame inside a fragmented message', Buffer.concat([clientFrame(BINARY, 'a', { fin: false }), clientFrame(BINARY, 'b')]), 1002],
    ['a text message that is not UTF-8', clientFrame(TEXT, Buffer.from([0x68, 0xff, 0x69])), 1007],
    ['a truncated UTF-8 sequence at the end of a message', clientFrame(TEXT, Buffer.from('✓').subarray(0, 2)), 1007],
    ['invalid UTF-8 across fragments', Buffer.concat([clientFrame(TEXT, Buffer.from([0xe2]), { fin: false }), clientFrame(CONTINUATION, Buffer.from([0x28, 0xa1]))]), 1007],
    ['a 64-bit length of 2^53', hugeHeader(BINARY, 0x200000), 1009],
    ['a 64-bit length with the top bit set', hugeHeader(BINARY, 0x80000000), 1009],
    ['a 1-byte close payload', clientFrame(CLOSE, Buffer.from([3])), 1002],
    ['a close reason that is not UTF-8', clientFrame(CLOSE, closeBody(1000, Buffer.from([0xc3, 0x28]))), 1007],
    ...[0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535].map((code): [string, Buffer, number] => [`close code ${code}`, clientFrame(CLOSE, closeBody(code)), 1002]),
  ];
  for (const [what, bytes, code] of cases) {
    it(`closes with ${code} on ${what}`, BOUNDED, async () => {
      assert.equal(await closeCodeFor(bytes), code);
    });
  }
});

describe('websocket: limits', () => {
  it('takes a message of exactly maxPayload bytes, single or fragmented', BOUNDED, async () => {
    const { peer, next } = await pair({ maxPayload: 1000 });
    peer.send(clientFrame(BINARY, Buffer.alloc(1000)));
    assert.equal((await next()).data.length, 1000);
    peer.send(Buffer.concat([clientFrame(BINARY, Buffer.alloc(600), { fin: false }), clientFrame(CONTINUATION, Buffer.alloc(400))]));
    assert.equal((await next()).data.length, 1000);
  });

  it('refuses a larger frame with 1009 from its header, before the payload arrives', BOUNDED, async () => {
    const header = clientFrame(BINARY, Buffer.alloc(1001)).subarray(0, 4);
    assert.equal(await closeCodeFor(header, { maxPayload: 1000 }), 1009);
    assert.equal(await closeCodeFor(hugeHeader(BINARY, 1), { maxPayload: 1000 }), 1009, 'a 4 GiB frame');
  });

  it('refuses a message whose fragments together exceed the limit with 1009', BOUNDED, async () => {
    const parts = Buffer.concat([clientFrame(TEXT, 'a'.repeat(600), { fin: false }), clientFrame(CONTINUATION, 'b'.repeat(401))]);
    assert.equal(await closeCodeFor(parts, { maxPayload: 1000 }), 1009);
  });

  it('does not count control frames between fragments towards a message', BOUNDED, async () => {
    const { peer, next } = await pair({ maxPayload: 1000 });
    peer.send(Buffer.concat([clientFrame(TEXT, 'a'.repeat(1000), { fin: false }), clientFrame(PING, 'x'.repeat(125)), clientFrame(CONTINUATION, '')]));
    assert.equal((await next()).data.length, 1000);
  });

  it('stops reading while its replies go unread, so a peer that only sends cannot make it queue without bound', BOUNDED, async () => {
    const { ws, peer } = await pair({ echo: true });
    peer.socket.pause(); // never reads the echoes
    const batch = Buffer.concat(Array(1000).fill(clientFrame(BINARY, Buffer.alloc(1000, 1))));
    const limit = 256 * MIB;
    let sent = 0;
    // Until the client's own queue shows the server has stopped taking bytes, or everything is sent.
    while (sent < limit && peer.socket.writableLength < 8 * MIB) {
      peer.socket.write(batch);
      sent += batch.length;
      await new Promise((r) => setImmediate(r));
    }
    assert.ok(sent < limit, `the server took all ${sent} bytes while its echoes went unread`);
    assert.ok(ws.bufferedAmount < 8 * MIB, `${ws.bufferedAmount} bytes of echoes queued`);
    assert.equal(ws.readyState, WebSocket.OPEN, 'a slow reader is waited for, not cut off');
  });

  it('cuts off a peer that sends more pings at once than it has pongs written (ws keeps at most 60 pending)', BOUNDED, async () => {
    const { peer, closed } = await pair();
    peer.send(Buffer.concat(Array(1000).fill(clientFrame(PING, Buffer.alloc(125, 1)))));
    assert.equal((await closed).code, 1006);
    await peer.closed();
  });
});
