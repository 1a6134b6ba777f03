// Ends a long turn of the event loop early, so that under load the
// connections a listener accepts are read, and timers run, within a batch or
// two instead of seconds.
//
// libuv (src/unix/linux.c, uv__io_poll; the kqueue backend is alike) calls
// epoll_wait again in the same turn whenever a call fills its batch of 1,024
// events, up to 48 times. With more ready sockets than that (2,000 clients at
// overload) one turn runs all 48 batches: 3.4 s measured on the 2-core bench
// machine. Nothing else runs meanwhile. Timers and immediates wait, and so
// does every connection accepted in that turn: libuv adds a new socket to
// epoll only when the next turn begins (the watcher queue is flushed at the
// top of uv__io_poll), so its request, already in the kernel, is not read.
// Clients whose connections were accepted early in such a turn waited 2-3 s
// for their first answer, which wrk counted as timeouts.
//
// libuv ends a turn after any batch in which one of its signal watchers
// fired, and this is the one lever a Node program has on it. So once the work
// seen in one turn has run past MAX_TURN_MS, the process sends itself SIGURG
// (ignored by default, and meaning nothing to Node or libuv), which it listens
// for with a no-op so that libuv watches for it. The turn ends after the batch
// that carries it; the cost is a kill(2) and a pipe read, at most once a turn.
import { performance } from 'node:perf_hooks';

/** A turn that has run this long (ms) is ended after its next batch of events. */
export const MAX_TURN_MS = 10;

/** The clock is read once per this many notes: a note is a counter bump on a hot path. */
const NOTES_PER_CHECK = 64;

const SIGNAL = 'SIGURG';

// No signals to send on Windows; libuv's Windows loop has no 48-batch turn either.
const supported = process.platform !== 'win32';

let notes = 0;
/** When this turn was first seen busy (0: not yet, or a new turn has begun). */
let busySince = 0;
let kicked = false;
let listening = false;
/** Turns this process has ended early, for the tests and the curious. */
let ended = 0;

function noop(): void {}

function turnOver(): void {
  busySince = 0;
  kicked = false;
}

/**
 * Marks a unit of work done in the current turn (a connection accepted, a
 * request read). Every NOTES_PER_CHECK notes it reads the clock; a turn found
 * busy is watched (an immediate marks its end), and one that stays busy past
 * MAX_TURN_MS is ended after its next batch.
 */
export function noteLoopWork(): void {
  if (++notes < NOTES_PER_CHECK) return;
  notes = 0;
  if (busySince === 0) {
    busySince = performance.now();
    // Immediates run once the poll phase, and with it the turn, is over.
    setImmediate(turnOver);
    if (supported && !listening) {
      // Before the first long turn: a signal watcher libuv starts now is polled from the next turn on.
      process.on(SIGNAL, noop);
      listening = true;
    }
    return;
  }
  if (kicked || performance.now() - busySince < MAX_TURN_MS) return;
  kicked = true;
  if (!supported) return;
  ended++;
  process.kill(process.pid, SIGNAL);
}

/** How many turns have been ended early so far. */
export function turnsEndedEarly(): number {
  return ended;
}
