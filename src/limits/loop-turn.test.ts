// A turn of the event loop that runs long under a flood of ready sockets is
// ended early. Measured in events, not time: how many socket reads happen
// between scheduling an immediate and its running, i.e. the rest of the turn.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { MAX_TURN_MS, noteLoopWork, turnsEndedEarly } from './loop-turn.ts';

/** Sockets kept readable at once: well over libuv's batch of 1,024 events. */
const SOCKETS = 2500;
/** libuv's epoll batch. */
const BATCH = 1024;
/** The reader's work per read (µs): slower than the flood, as a router at overload is slower than its clients. */
const WORK_US = 10;

function work(): void {
  const until = performance.now() + WORK_US / 1000;
  while (performance.now() < until);
}

// Connects SOCKETS sockets to the port in argv[1] and writes a byte to each
// whose last byte has left, over and over: most of them are readable at every
// epoll_wait of the reader. Prints "up" once all are connected.
const FLOOD = `
const net = require('node:net');
const [port, count] = process.argv.slice(1).map(Number);
const sockets = [];
let up = 0;
for (let i = 0; i < count; i++) {
  const s = net.connect(port, '127.0.0.1', () => { if (++up === count) { process.stdout.write('up\\n'); pump(); } });
  s.on('error', () => process.exit(0));
  sockets.push(s);
}
function pump() {
  for (const s of sockets) if (s.writableLength === 0) s.write('x');
  setImmediate(pump);
}
`;

/**
 * Serves a flood of readable sockets and returns the most socket reads seen
 * between an immediate being scheduled and it running, over `samples` turns
 * (or until one reaches `cap`).
 * `onRead` runs on every read. A turn that reaches `cap` reads is ended then
 * (with the same signal loop-turn.ts sends) and counts as `cap`: a turn of 48
 * batches takes seconds here.
 */
async function longestTurn(samples: number, onRead: () => void, cap = Number.POSITIVE_INFINITY): Promise<number> {
  let reads = 0;
  let from = 0;
  let capped = false;
  const server = net.createServer((socket) => {
    socket.on('data', () => {
      reads++;
      work();
      onRead();
      if (!capped && reads - from >= cap) {
        capped = true;
        process.kill(process.pid, 'SIGURG');
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: SOCKETS }, resolve));
  const { port } = server.address() as net.AddressInfo;
  const flood = spawn(process.execPath, ['-e', FLOOD, String(port), String(SOCKETS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve, reject) => {
      flood.stdout.on('data', (d) => String(d).includes('up') && resolve());
      flood.once('exit', (code) => reject(new Error(`the flood exited (${code}) before connecting`)));
    });
    // Let the flood settle, then measure turn after turn from inside a read.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const turns: number[] = [];
    await new Promise<void>((resolve) => {
      const measure = () => {
        from = reads;
        capped = false;
        setImmediate(() => {
          turns.push(Math.min(reads - from, cap));
          if (turns.length === samples || reads - from >= cap) resolve();
          // The next measurement starts inside the next turn's reads.
          else setTimeout(measure, 0);
        });
      };
      measure();
    });
    return Math.max(...turns);
  } finally {
    flood.kill();
    await new Promise((resolve) => server.close(resolve));
  }
}

function noop(): void {}

describe('loop turns', { skip: process.platform === 'win32' && 'no signals to end a turn with' }, () => {
  it('a flood of ready sockets holds one turn for many batches when nothing ends it', async () => {
    // The behaviour loop-turn.ts works around; if this fails, libuv no longer polls batch after batch in one turn.
    process.on('SIGURG', noop);
    const longest = await longestTurn(5, () => {}, 24 * BATCH);
    process.off('SIGURG', noop);
    assert.equal(longest, 24 * BATCH, `the longest turn read ${longest} times, expected ${24 * BATCH} or more`);
  });

  it('noting the work ends a turn within a few batches of running past MAX_TURN_MS', async () => {
    const before = turnsEndedEarly();
    const longest = await longestTurn(5, noteLoopWork);
    assert.ok(turnsEndedEarly() > before, 'no turn was ended early');
    // A batch may be running when the turn passes MAX_TURN_MS, the next one carries the signal: a few batches, plus
    // however many a fast machine reads in MAX_TURN_MS.
    assert.ok(longest < 16 * BATCH, `the longest turn read ${longest} times (MAX_TURN_MS ${MAX_TURN_MS}), expected under ${16 * BATCH}`);
  });

  it('a light load never sends the signal', async () => {
    const before = turnsEndedEarly();
    for (let i = 0; i < 1000; i++) {
      noteLoopWork();
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(turnsEndedEarly(), before);
  });
});
