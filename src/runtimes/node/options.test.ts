import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { describe, it } from 'node:test';
import { parseOptions } from './options.ts';
import { SERVER_ENTRY, startRuntime } from './testing.ts';

describe('node runtime: options', () => {
  it('reads the socket, port and codepath from flags and env', () => {
    assert.deepEqual(parseOptions([], {}), {
      socket: undefined,
      port: 8888,
      host: '0.0.0.0',
      codepath: '/userfunc/user',
      maxBodyBytes: 50 * 1024 * 1024,
      debug: false,
      exitOnStdinEof: false,
      warmUp: true,
    });
    assert.equal(parseOptions([], { FLINT_WARM_UP: '0' }).warmUp, false);
    assert.equal(parseOptions([], { FLINT_WARM_UP: '1' }).warmUp, true);
    assert.equal(parseOptions([], { FLINT_SOCKET: '/s/w.sock' }).socket, '/s/w.sock');
    assert.equal(parseOptions(['--socket', '/a.sock'], { FLINT_SOCKET: '/s/w.sock' }).socket, '/a.sock');
    const tcp = parseOptions(['--port=9000'], { FLINT_SOCKET: '/s/w.sock' });
    assert.equal(tcp.socket, undefined, 'an explicit --port beats FLINT_SOCKET');
    assert.equal(tcp.port, 9000);
    assert.equal(parseOptions([], { FLINT_USERFUNC_DIR: '/code/' }).codepath, '/code/user');
    assert.equal(parseOptions(['--codepath', '/x/f.js'], {}).codepath, '/x/f.js');
    assert.equal(parseOptions([], { FLINT_DEBUG: '1', FLINT_EXIT_ON_STDIN_EOF: '1' }).debug, true);
    assert.throws(() => parseOptions(['--port', 'abc'], {}), /port must be a positive integer/);
    assert.throws(() => parseOptions([], { FLINT_MAX_BODY_BYTES: '-1' }), /FLINT_MAX_BODY_BYTES/);
  });

  it('serves over TCP with --port (kubernetes mode)', async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const child = spawn(process.execPath, [SERVER_ENTRY, '--port', String(port), '--host', '127.0.0.1'], { stdio: 'ignore' });
    const exited = new Promise((r) => child.once('exit', r));
    try {
      let status = 0;
      for (let i = 0; i < 500 && status !== 200; i++) {
        status = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => r.status,
          () => 0,
        );
        if (status !== 200) await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(status, 200);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });

  it('exits when stdin closes if asked to (its parent died)', async () => {
    const rt = await startRuntime({ FLINT_EXIT_ON_STDIN_EOF: '1' });
    try {
      rt.child.stdin!.end();
      assert.equal(await rt.exited, 0);
    } finally {
      await rt.stop();
    }
  });
});
