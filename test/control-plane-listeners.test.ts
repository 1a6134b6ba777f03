// The control plane listens on a SO_REUSEPORT group of controller.acceptSockets
// sockets, as the router does: every socket of the group serves the API (the
// CLI included), and a stop closes them and the connections they took without
// waiting out a keep-alive.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { listenersOn } from '../src/testing/listeners.ts';
import { flint, startServer } from './helpers/server.ts';

describe('control plane listeners', { timeout: 120_000 }, () => {
  it('binds controller.acceptSockets sockets on its port, serves through them, and closes them all on stop', async () => {
    const server = await startServer({ sets: ['executor.sandbox=none', 'controller.acceptSockets=3'] });
    const port = Number(new URL(server.controllerUrl).port);
    let stopped = false;
    try {
      assert.equal(listenersOn(port), 3);
      // Each a new connection: the kernel spreads them over the group, so every socket's connections get answered.
      const statuses = await Promise.all(
        Array.from({ length: 30 }, async () => {
          const res = await fetch(`${server.controllerUrl}/v1/namespaces/default/environments`, { headers: { connection: 'close' } });
          await res.arrayBuffer();
          return res.status;
        }),
      );
      assert.deepEqual(new Set(statuses), new Set([200]));
      const cli = flint(server, ['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '0']);
      assert.equal(cli.code, 0, cli.stderr);
      // Neither an idle keep-alive connection nor a watch (which replays the environment, then never ends) may hold the stop up (fastify cut these
      // itself when it listened).
      const open = async (request: string) => {
        const s = net.connect(port, '127.0.0.1');
        s.on('error', () => {});
        s.write(request);
        await new Promise((resolve) => s.once('data', resolve));
      };
      await open('GET /v1/namespaces/default/environments HTTP/1.1\r\nHost: x\r\n\r\n');
      await open('GET /v1/watch?kind=Environment&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n');
      await server.stop();
      stopped = true;
      assert.equal(server.child.signalCode, null, 'the server was killed: its stop did not finish');
      assert.equal(server.child.exitCode, 0);
      assert.equal(listenersOn(port), 0);
    } finally {
      if (!stopped) await server.stop();
    }
  });
});
