// A turn of the event loop that runs long under a flood of ready sockets is
// ended early: measured in events, not time (how many socket reads happen
// between scheduling an immediate and its running, i.e. the rest of the
// turn). The watch's bookkeeping, on a clock the test moves.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { MAX_TURN_MS, noteLoopWork, TurnWatch, turnEndSignals } from './loop-turn.ts';

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
          // The next measurement starts in the next turn's timers, before its poll phase.
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

describe('loop turns', { skip: process.platform === 'win32' && 'no signals to end a turn with', timeout: 120_000 }, () => {
  it('noting the work ends a turn within a few batches of running past MAX_TURN_MS', async (t) => {
    // First the behaviour loop-turn.ts works around: with nothing ending it, one turn of the flood reads batch after
    // batch (stopped at the cap, which the helper's own signal enforces). A machine where the flood cannot keep
    // that many sockets ready has no long turn to end.
    process.on('SIGURG', noop);
    const unbounded = await longestTurn(5, () => {}, 24 * BATCH);
    process.off('SIGURG', noop);
    if (unbounded < 24 * BATCH) {
      t.skip(`the flood held no turn for 24 batches here (at most ${unbounded} reads): nothing to end`);
      return;
    }
    const before = turnEndSignals();
    const longest = await longestTurn(5, noteLoopWork);
    assert.ok(turnEndSignals() > before, 'no signal was sent to end a turn');
    // A batch may be running when the turn passes MAX_TURN_MS, and the next one carries the signal: a few batches,
    // plus however many a fast machine reads in MAX_TURN_MS.
    assert.ok(longest < 12 * BATCH, `the longest turn read ${longest} times (MAX_TURN_MS ${MAX_TURN_MS}), expected under ${12 * BATCH}`);
  });
});

/** A TurnWatch on a clock the test moves; turns end when the test says. */
function fakeWatch() {
  const f = { t: 1000, nowCalls: 0, pending: [] as Array<() => void>, endings: 0 };
  const watch = new TurnWatch({
    now: () => {
      f.nowCalls++;
      return f.t;
    },
    afterTurn: (fn) => f.pending.push(fn),
    endTurn: () => f.endings++,
  });
  const notes = (n: number) => {
    for (let i = 0; i < n; i++) watch.note();
  };
  const endOfTurn = () => {
    for (const fn of f.pending.splice(0)) fn();
  };
  return { f, watch, notes, endOfTurn };
}

describe('TurnWatch', () => {
  it('ends a busy turn once it has run MAX_TURN_MS, once, and the next long turn again', () => {
    const { f, notes, endOfTurn } = fakeWatch();
    notes(64); // found busy
    f.t += MAX_TURN_MS - 1;
    notes(640);
    assert.equal(f.endings, 0);
    f.t += 1;
    notes(64);
    assert.equal(f.endings, 1);
    f.t += 100;
    notes(640);
    assert.equal(f.endings, 1, 'asked to end the same turn again');
    endOfTurn();
    notes(64);
    f.t += MAX_TURN_MS;
    notes(64);
    assert.equal(f.endings, 2);
  });

  it('short turns, however many, add up to nothing', () => {
    const { f, notes, endOfTurn } = fakeWatch();
    for (let turn = 0; turn < 1000; turn++) {
      notes(200);
      f.t += 1;
      endOfTurn();
    }
    assert.equal(f.endings, 0);
  });

  it('a turn with fewer than 64 notes reads no clock and schedules nothing', () => {
    const { f, notes, endOfTurn } = fakeWatch();
    notes(63);
    assert.equal(f.nowCalls, 0);
    assert.equal(f.pending.length, 0);
    // The count starts over with each turn watched: a light load reads the clock once per 64 notes at most.
    notes(1 + 10);
    endOfTurn();
    notes(60);
    assert.equal(f.nowCalls, 1);
  });
});
