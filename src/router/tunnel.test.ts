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

async function tunnel(idleMs: number, maxMs: number) {
  const [client, clientSide] = await connection();
  const [instance, instanceSide] = await connection();
  clientSide.pause();
  instanceSide.pause();
  const ended: string[] = [];
  const outcomes: TunnelOutcome[] = [];
  new Tunnel(clientSide, Buffer.alloc(0), instanceSide, Buffer.alloc(0), (_t, outcome) => outcomes.push(outcome), { idleMs, maxMs, onLimit: (why) => ended.push(why) });
  return { client, instance, ended, outcomes };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
});
