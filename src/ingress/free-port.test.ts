import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { describe, it } from 'node:test';
import { freePort, portsOutsideEphemeral } from './free-port.ts';

function listen(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => resolve(s));
  });
}

describe('portsOutsideEphemeral', () => {
  it('picks below the ephemeral range when it leaves room there, above it otherwise', () => {
    assert.deepEqual(portsOutsideEphemeral('32768\t60999\n'), [10_000, 32_767]);
    assert.deepEqual(portsOutsideEphemeral('10500 60999'), [61_000, 65_535]);
  });

  it('gives up when the range covers almost every port', () => {
    assert.equal(portsOutsideEphemeral('1024 65000'), undefined);
  });

  it("assumes Linux's default range when the file is missing or unreadable", () => {
    assert.deepEqual(portsOutsideEphemeral(undefined), [10_000, 32_767]);
    assert.deepEqual(portsOutsideEphemeral('garbage'), [10_000, 32_767]);
    assert.deepEqual(portsOutsideEphemeral('1 2 3'), [10_000, 32_767]);
  });
});

describe('freePort', () => {
  it('hands out ports outside the ephemeral range that can be bound, never the same one twice', async () => {
    const span = portsOutsideEphemeral(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'));
    assert.ok(span, 'this machine leaves room outside its ephemeral range');
    const ports: number[] = [];
    for (let i = 0; i < 40; i++) ports.push(await freePort());
    assert.equal(new Set(ports).size, ports.length);
    for (const p of ports) assert.ok(p >= span[0] && p <= span[1], `${p} outside [${span[0]}, ${span[1]}]`);
    // Each can be listened on right away: nothing this helper did still holds it.
    const servers = await Promise.all(ports.slice(0, 5).map(listen));
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  it('skips a port another listener holds', async () => {
    const [first, last] = portsOutsideEphemeral(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'))!;
    // A port held by a listener of this test (never handed out, so only the bind check can refuse it), and the next one free.
    let held: net.Server | undefined;
    let port = 23_456;
    for (; !held && port < last - 1; port += 2) {
      held = await listen(port).catch(() => undefined);
      if (held) {
        const next = await listen(port + 1).catch(() => undefined);
        if (next) await new Promise((r) => next.close(r));
        else {
          await new Promise((r) => held!.close(r));
          held = undefined;
        }
      }
    }
    assert.ok(held);
    const heldPort = (held.address() as net.AddressInfo).port;
    const at = (p: number) => (p - first + 0.5) / (last - first + 1);
    // The held port first, then the ports after it: the first of those not handed out before (the first test took
    // 40 at random) and free is the answer.
    const picks = [heldPort, heldPort + 1, heldPort + 2, heldPort + 3].map(at);
    let drawn = 0;
    try {
      const got = await freePort('127.0.0.1', () => picks[drawn++] ?? 0.5);
      assert.notEqual(got, heldPort);
      assert.ok(got > heldPort && got <= heldPort + 3, `${got}: one of the ports after the held one`);
      assert.ok(drawn >= 2, 'the held port was tried first and refused');
    } finally {
      await new Promise((r) => held!.close(r));
    }
  });

  it('binds on the host it is given', async () => {
    const p = await freePort('127.0.0.1');
    const s = await listen(p);
    await new Promise((r) => s.close(r));
  });
});
