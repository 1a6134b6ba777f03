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
// for with a no-op so that libuv watches for it. The turn ends after the next
// batch that carries it (up to 1,024 more events); the cost is a kill(2), a
// pipe read and the no-op's call, at most once a turn. Work the router does
// not note (frames through WebSocket and CONNECT tunnels, reads of upstream
// answers) does not end a turn by itself; requests and new connections do.
import { performance } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

/** A turn that has run this long (ms) is ended after its next batch of events. */
export const MAX_TURN_MS = 10;

/** The clock is read once per this many notes: a note is a counter bump on a hot path. */
const NOTES_PER_CHECK = 64;

const SIGNAL = 'SIGURG';

// No signals on Windows, whose libuv loop has no 48-batch turn either; and a
// worker thread's kill would end the main thread's turn, not its own.
const supported = process.platform !== 'win32' && isMainThread;

/** What a TurnWatch needs of the process: a clock (ms), a way to run code once this turn is over, a way to end it. */
export interface TurnHooks {
  now(): number;
  afterTurn(fn: () => void): void;
  endTurn(): void;
}

/** Counts the work noted in each turn and ends a turn that runs past MAX_TURN_MS. */
export class TurnWatch {
  readonly #hooks: TurnHooks;
  #notes = 0;
  /** When this turn was found busy, NOTES_PER_CHECK notes into it (0: not yet, or a new turn has begun). */
  #busySince = 0;
  #ended = false;
  /** Turns it has asked to end. */
  endings = 0;

  constructor(hooks: TurnHooks) {
    this.#hooks = hooks;
  }

  /**
   * Marks a unit of work done in the current turn (a connection accepted, a
   * request read). Every NOTES_PER_CHECK notes it reads the clock; a turn
   * found busy is watched (its end resets the watch), and one still going
   * MAX_TURN_MS later is ended, once.
   */
  note(): void {
    if (++this.#notes < NOTES_PER_CHECK) return;
    this.#notes = 0;
    if (this.#busySince === 0) {
      this.#busySince = this.#hooks.now();
      this.#hooks.afterTurn(this.#turnOver);
      return;
    }
    if (this.#ended || this.#hooks.now() - this.#busySince < MAX_TURN_MS) return;
    this.#ended = true;
    this.endings++;
    this.#hooks.endTurn();
  }

  readonly #turnOver = (): void => {
    this.#notes = 0;
    this.#busySince = 0;
    this.#ended = false;
  };
}

function noop(): void {}

/** The process's watch: immediates run once the poll phase, and with it the turn, is over. */
const watch = new TurnWatch({
  now: () => performance.now(),
  afterTurn: (fn) => {
    setImmediate(fn);
    // Listening from the first busy turn on. On Linux the loop's signal pipe is polled from its first turn (libuv
    // watches SIGCHLD), so the handler, installed at once, works in this very turn. Checked each time: without a
    // listener SIGURG is ignored and the turn would go on.
    if (supported && process.listenerCount(SIGNAL) === 0) process.on(SIGNAL, noop);
  },
  endTurn: () => {
    if (supported) process.kill(process.pid, SIGNAL);
  },
});

/** Notes a unit of the event loop's work in this turn (TurnWatch.note). */
export function noteLoopWork(): void {
  watch.note();
}

/** How many times this process has asked to end a turn. */
export function turnEndSignals(): number {
  return watch.endings;
}
