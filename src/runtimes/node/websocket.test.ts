// The server-side WebSocket over a real TCP connection, with the test as a
// raw client: the frames it sends, the closing handshake, and its API
// contract (the `ws` subset functions use).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { WebSocket, WebSocketError } from './websocket.ts';
import { clientFrame, closeBody, closeOf, RawPeer } from './ws-testing.ts';

const TEXT = 0x1;
const BINARY = 0x2;
const CLOSE = 0x8;
const PING = 0x9;
const PONG = 0xa;
/** A regression that leaves a wait unanswered fails its own test instead of hanging the run. */
const BOUNDED = { timeout: 20_000 };

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** A connected pair: the server's WebSocket and the test's raw client. */
async function pair(options?: ConstructorParameters<typeof WebSocket>[2], head?: Buffer) {
  // allowHalfOpen as the HTTP server has it, whose sockets the WebSocket gets.
  const server = net.createServer({ allowHalfOpen: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const accepted = once(server, 'connection');
  const socket = net.connect(port, '127.0.0.1');
  const [serverSide] = (await accepted) as [net.Socket];
  const peer = new RawPeer(socket, false);
  const ws = new WebSocket(serverSide, head, options);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.on('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString() }));
  });
  cleanups.push(() => {
    socket.destroy();
    serverSide.destroy();
    server.close();
  });
  return { ws, peer, closed };
}

function nextMessage(ws: WebSocket): Promise<{ data: Buffer; isBinary: boolean }> {
  return new Promise((resolve) => ws.once('message', (data: Buffer, isBinary: boolean) => resolve({ data, isBinary })));
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
    assert.deepEqual(sent, [null]);
    assert.throws(() => ws.send({ not: 'data' }), TypeError);
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
        [0, false, 'b'],
        [0, true, 'c'],
        [TEXT, true, 'd'],
      ],
    );
  });

  it('has the ws readyState constants, protocol and bufferedAmount', BOUNDED, async () => {
    const { ws } = await pair({ protocol: 'chat' });
    assert.deepEqual([WebSocket.CONNECTING, WebSocket.OPEN, WebSocket.CLOSING, WebSocket.CLOSED], [0, 1, 2, 3]);
    assert.deepEqual([ws.CONNECTING, ws.OPEN, ws.CLOSING, ws.CLOSED], [0, 1, 2, 3]);
    assert.equal(ws.readyState, WebSocket.OPEN);
    assert.equal(ws.protocol, 'chat');
    assert.equal(typeof ws.bufferedAmount, 'number');
  });
});

describe('websocket: receiving', () => {
  it('emits messages with isBinary, also from the bytes read with the handshake', BOUNDED, async () => {
    const { ws, peer } = await pair(undefined, clientFrame(TEXT, 'from the head'));
    // Listening right after construction is in time for the head's message.
    const first = nextMessage(ws);
    assert.equal((await first).data.toString(), 'from the head');
    peer.send(clientFrame(BINARY, Buffer.from([7])));
    const second = await nextMessage(ws);
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
});

describe('websocket: closing', () => {
  it('server-initiated: sends the close frame, waits for the peer, then ends the connection', BOUNDED, async () => {
    const { ws, peer, closed } = await pair();
    ws.close(4000, 'bye');
    assert.equal(ws.readyState, WebSocket.CLOSING);
    const f = await peer.frame();
    assert.equal(f.opcode, CLOSE);
    assert.deepEqual(closeOf(f), { code: 4000, reason: 'bye' });
    assert.equal(peer.ended, false, 'the connection stays until the peer answers');
    // Messages still arrive while closing.
    const msg = nextMessage(ws);
    peer.send(clientFrame(TEXT, 'late'));
    assert.equal((await msg).data.toString(), 'late');
    peer.send(clientFrame(CLOSE, closeBody(4000, 'ok')));
    await peer.closed();
    assert.deepEqual(await closed, { code: 4000, reason: 'ok' });
    assert.equal(ws.readyState, WebSocket.CLOSED);
  });

  it('client-initiated: echoes the code, ends the connection and reports the code and reason', BOUNDED, async () => {
    const { ws, peer, closed } = await pair();
    peer.send(clientFrame(CLOSE, closeBody(4100, 'done ✓')));
    const f = await peer.frame();
    assert.equal(f.opcode, CLOSE);
    assert.equal(closeOf(f).code, 4100);
    await peer.closed();
    assert.deepEqual(await closed, { code: 4100, reason: 'done ✓' });
    assert.equal(ws.readyState, WebSocket.CLOSED);
  });

  it('an empty close frame is answered with an empty one and reported as 1005', BOUNDED, async () => {
    const { peer, closed } = await pair();
    peer.send(clientFrame(CLOSE));
    const f = await peer.frame();
    assert.deepEqual([f.opcode, f.payload.length], [CLOSE, 0]);
    assert.equal((await closed).code, 1005);
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
  it('gets a close frame with the code and a reason; error listeners hear of it', BOUNDED, async () => {
    const { ws, peer, closed } = await pair();
    const errored = once(ws, 'error');
    peer.send(clientFrame(TEXT, 'unmasked', { mask: false }));
    const f = await peer.frame();
    assert.equal(f.opcode, CLOSE);
    assert.equal(closeOf(f).code, 1002);
    assert.match(closeOf(f).reason, /masked/);
    const [err] = (await errored) as [WebSocketError];
    assert.ok(err instanceof WebSocketError);
    assert.equal(err.closeCode, 1002);
    await peer.closed();
    assert.equal((await closed).code, 1006, 'no close frame came from the peer');
  });

  it('stops reading while its replies go unread, so a peer that only sends cannot make it queue without bound', BOUNDED, async () => {
    const { ws, peer } = await pair();
    peer.socket.pause(); // never reads the pongs
    const batch = Buffer.concat(Array(1000).fill(clientFrame(PING, Buffer.alloc(125, 1))));
    const limit = 64 * 1024 * 1024;
    let sent = 0;
    // Until the client's own queue shows the server has stopped taking bytes, or everything is sent.
    while (sent < limit && peer.socket.writableLength < 8 * 1024 * 1024) {
      peer.socket.write(batch);
      sent += batch.length;
      await new Promise((r) => setImmediate(r));
    }
    assert.ok(sent < limit, `the server took all ${sent} bytes while its pongs went unread`);
    assert.ok(ws.bufferedAmount < 8 * 1024 * 1024, `${ws.bufferedAmount} bytes of pongs queued`);
  });

  it('does not throw when nobody listens for errors', BOUNDED, async () => {
    const { ws, peer, closed } = await pair({ maxPayload: 10 });
    assert.equal(ws.listenerCount('error'), 0);
    peer.send(clientFrame(BINARY, Buffer.alloc(11)));
    const f = await peer.frame();
    assert.equal(closeOf(f).code, 1009);
    await closed;
  });

  it('closes with 1007 on a text message that is not UTF-8', BOUNDED, async () => {
    const { peer } = await pair();
    peer.send(clientFrame(TEXT, Buffer.from([0xff])));
    assert.equal(closeOf(await peer.frame()).code, 1007);
  });
});
