// A tunnel between two real loopback connections, with streaming limits.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { eventually } from '../testing/eventually.ts';
import { Tunnel, type TunnelOutcome } from './tunnel.ts';

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) s.close();
});

/** Both ends of one loopback connection: [the far end, the router's end]. */
async function connection(): Promise<[net.Socket, net.Socket]> {
  const server = net.createServer();
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const far = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  const [near] = (await once(server, 'connection')) as [net.Socket];
  await once(far, 'connect');
  far.on('error', () => {});
  sockets.push(far, near);
  return [far, near];
}

async function tunnel(idleMs: number, maxMs: number, websocket = false) {
  const [client, clientSide] = await connection();
  const [instance, instanceSide] = await connection();
  clientSide.pause();
  instanceSide.pause();
  const ended: string[] = [];
  const outcomes: TunnelOutcome[] = [];
  new Tunnel(clientSide, Buffer.alloc(0), instanceSide, Buffer.alloc(0), (_t, outcome) => outcomes.push(outcome), { idleMs, maxMs, websocket, onLimit: (why) => ended.push(why) });
  return { client, instance, ended, outcomes };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Everything a socket receives until it closes. */
async function allOf(socket: net.Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await once(socket, 'close');
  return Buffer.concat(chunks);
}

/** A close frame's code and reason, unmasking it when masked. */
function closeOf(frame: Buffer): { code: number; reason: string } {
  assert.equal(frame[0], 0x88, `a close frame: ${frame.toString('hex')}`);
  const masked = (frame[1] & 0x80) !== 0;
  const length = frame[1] & 0x7f;
  const mask = masked ? frame.subarray(2, 6) : Buffer.alloc(4);
  const payload = Buffer.from(frame.subarray(masked ? 6 : 2, (masked ? 6 : 2) + length).map((v, i) => v ^ mask[i % 4]));
  return { code: payload.readUInt16BE(0), reason: payload.subarray(2).toString() };
}

describe('tunnel limits', () => {
  it('ends both sides once nothing has passed for the idle limit, as an ok outcome', async () => {
    const t = await tunnel(200, 0);
    t.client.write('x');
    await once(t.instance, 'data');
    await Promise.all([once(t.client, 'close'), once(t.instance, 'close')]);
    assert.deepEqual(t.ended, ['no data either way for 0.2 s']);
    await eventually(() => t.outcomes.length === 1, 'the outcome');
    assert.deepEqual(t.outcomes, ['ok']);
  });

  it('does not count backpressure as silence: a client that pauses reading gets every byte', async () => {
    const t = await tunnel(200, 0);
    const size = 32 * 1024 * 1024;
    t.client.pause();
    t.instance.write(Buffer.alloc(size, 1));
    await sleep(800);
    assert.deepEqual(t.ended, [], 'no limit while the client is not taking what was sent');
    let got = 0;
    t.client.on('data', (c: Buffer) => {
      got += c.length;
    });
    t.client.resume();
    await eventually(() => got === size, `all ${size} bytes (got ${got})`);
    await once(t.client, 'close');
    assert.deepEqual(t.ended, ['no data either way for 0.2 s']);
  });

  it('ends a busy tunnel at its maximum duration', async () => {
    const t = await tunnel(0, 300);
    const ticker = setInterval(() => t.client.write('.'), 20);
    t.instance.on('data', () => {});
    await once(t.client, 'close');
    clearInterval(ticker);
    assert.deepEqual(t.ended, ['open for its maximum duration of 0.3 s']);
  });

  it('sends a WebSocket close frame (1001) each way at a limit, after the whole frames already on their way', async () => {
    const t = await tunnel(300, 0, true);
    const toClient = allOf(t.client);
    const toInstance = allOf(t.instance);
    // A masked text frame "hi" from the client, an unmasked one from the instance.
    t.client.write(Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0x68, 0x69]));
    t.instance.write(Buffer.from([0x81, 2, 0x68, 0x69]));
    const [client, instance] = await Promise.all([toClient, toInstance]);
    assert.deepEqual([...client.subarray(0, 4)], [0x81, 2, 0x68, 0x69]);
    assert.deepEqual(closeOf(client.subarray(4)), { code: 1001, reason: 'idle timeout' });
    assert.deepEqual([...instance.subarray(0, 8)], [0x81, 0x82, 0, 0, 0, 0, 0x68, 0x69]);
    assert.deepEqual(closeOf(instance.subarray(8)), { code: 1001, reason: 'idle timeout' });
    assert.equal(instance[9] & 0x80, 0x80, 'the frame to the instance is masked, as client frames must be');
  });

  it('sends no close frame into the middle of a frame: that side is ended without one', async () => {
    const t = await tunnel(0, 300, true);
    const toClient = allOf(t.client);
    const toInstance = allOf(t.instance);
    // A binary frame of 10 bytes of which only 3 arrive before the limit.
    t.instance.write(Buffer.from([0x82, 10, 1, 2, 3]));
    const [client, instance] = await Promise.all([toClient, toInstance]);
    assert.deepEqual([...client], [0x82, 10, 1, 2, 3]);
    assert.deepEqual(closeOf(instance), { code: 1001, reason: 'maximum duration' });
  });
});
