import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { type SpawnedProcess, spawnerPid, spawnProcess } from './spawner.ts';

const ENV = { PATH: '/usr/bin:/bin' };

function collect(p: SpawnedProcess): { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  p.stdout.on('data', (c: Buffer) => (out += c.toString()));
  p.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return { out: () => out, err: () => err };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('spawner', () => {
  it('runs a command in a session of its own, with its output, stdin and exit', async () => {
    const p = spawnProcess(['/bin/sh', '-c', 'echo out; echo err >&2; cat; echo "sid $(ps -o sid= -p $$ | tr -d " ") pid $$"; exit 3'], { env: ENV, cwd: '/' });
    const io = collect(p);
    await once(p, 'spawn');
    assert.ok(p.pid !== undefined && p.pid > 0);
    const closed = once(p, 'close');
    p.stdin.end();
    const [code, signal] = (await once(p, 'exit')) as [number, string | null];
    await closed;
    assert.equal(code, 3);
    assert.equal(signal, null);
    assert.match(io.out(), /^out\n/);
    assert.equal(io.err(), 'err\n');
    // detached: the command leads its own session (and process group), so a group signal reaches all it starts.
    assert.match(io.out(), new RegExp(`sid ${p.pid} pid ${p.pid}`));
  });

  it('a command that cannot start is an error event, with no pid, exit or close', async () => {
    const p = spawnProcess(['/nonexistent/flint-no-such-binary'], { env: ENV, cwd: '/' });
    const [err] = (await once(p, 'error')) as [NodeJS.ErrnoException];
    assert.equal(err.code, 'ENOENT');
    assert.equal(p.pid, undefined);
    // An env value with a NUL byte is refused by spawn itself: the same, not a crash of the spawner.
    const q = spawnProcess(['/bin/true'], { env: { ...ENV, BAD: 'a\0b' }, cwd: '/' });
    const [err2] = (await once(q, 'error')) as [Error];
    assert.match(err2.message, /null bytes|NUL|\\0/i);
    // Nobody listening for its error (a renice, say): no uncaught exception.
    spawnProcess(['/nonexistent/flint-no-such-binary'], { env: ENV, cwd: '/' });
    const r = spawnProcess(['/bin/true'], { env: ENV, cwd: '/' });
    const [code] = (await once(r, 'exit')) as [number];
    assert.equal(code, 0, 'the spawner still works');
  });

  it('a command that prints without end is held back by its pipe, not queued in the spawner', async () => {
    const p = spawnProcess(['/usr/bin/yes', 'flint output that nobody reads fast enough'], { env: ENV, cwd: '/' });
    let bytes = 0;
    // A slow reader: each chunk costs the server's event loop a little.
    p.stdout.on('data', (c: Buffer) => {
      bytes += c.length;
      const until = Date.now() + 1;
      while (Date.now() < until);
    });
    await once(p, 'spawn');
    await new Promise((r) => setTimeout(r, 3000));
    const status = fs.readFileSync(`/proc/${spawnerPid()}/status`, 'utf8');
    const rssMB = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) / 1024;
    const exited = once(p, 'close');
    process.kill(-(p.pid as number), 'SIGKILL');
    await exited;
    assert.ok(bytes > 0);
    // Unbounded, the queue grew by hundreds of MB a second; bounded, the spawner stays near its own size.
    assert.ok(rssMB < 200, `the spawner holds ${rssMB.toFixed(0)} MB after 3 s of output`);
  });

  it('when the spawner dies, what it started is killed and reported gone', async () => {
    const p = spawnProcess(['/bin/sleep', '60'], { env: ENV, cwd: '/' });
    await once(p, 'spawn');
    const pid = p.pid as number;
    assert.ok(alive(pid));
    const helper = spawnerPid();
    assert.ok(helper !== undefined);
    const exit = once(p, 'exit');
    process.kill(helper, 'SIGKILL');
    const [code, signal] = (await exit) as [number | null, string];
    assert.equal(code, null);
    assert.equal(signal, 'SIGKILL');
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(alive(pid), false);
    // A new spawner starts for the next command.
    const q = spawnProcess(['/bin/true'], { env: ENV, cwd: '/' });
    const [c] = (await once(q, 'exit')) as [number];
    assert.equal(c, 0);
    assert.notEqual(spawnerPid(), helper);
  });

  it("a command started by the next spawner is not taken for one of the dead spawner's", async () => {
    const first = spawnProcess(['/bin/sleep', '60'], { env: ENV, cwd: '/' });
    const firstExit = once(first, 'exit');
    await once(first, 'spawn');
    const helper = spawnerPid() as number;
    process.kill(helper, 'SIGKILL');
    // Between the old spawner's channel closing and its exit, the next command goes to a new spawner.
    while (spawnerPid() === helper) await new Promise((r) => setTimeout(r, 1));
    const next = spawnProcess(['/bin/sh', '-c', 'sleep 0.5; exit 7'], { env: ENV, cwd: '/' });
    const [code, signal] = (await once(next, 'exit')) as [number | null, string | null];
    assert.deepEqual([code, signal], [7, null]);
    const [, firstSignal] = (await firstExit) as [number | null, string];
    assert.equal(firstSignal, 'SIGKILL');
  });
});
