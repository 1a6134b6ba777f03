// Starts worker and build processes from a small helper process instead of
// the server itself. Starting a process forks the one that asks, and a fork
// costs in proportion to the parent's memory: from the server (hundreds of
// MB with its router, store and connectors) it held the event loop ~5-25 ms
// per worker, so a burst of cold starts, or a rollout's replacements, stalled
// every request in flight. The helper is ~40 MB and does nothing else.
//
// What the caller gets behaves as the ChildProcess it used to get, in the
// parts it used: pid, stdin.end(), stdout/stderr data and end, and the
// 'exit', 'close' and 'error' events. Signals go from the server straight to
// the process (group) by pid.
import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import type { SpawnerReply, SpawnerRequest } from './spawner-protocol.ts';

const ENTRY = path.join(import.meta.dirname, 'spawner-process.ts');

export interface SpawnedProcess extends EventEmitter {
  /** Set once the process has started; undefined when it could not be. */
  readonly pid: number | undefined;
  readonly stdin: { end(): void };
  readonly stdout: PassThrough;
  readonly stderr: PassThrough;
  on(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: string, listener: (...args: any[]) => void): this;
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  once(event: 'close', listener: () => void): this;
  once(event: 'error', listener: (err: Error) => void): this;
  once(event: string, listener: (...args: any[]) => void): this;
}

class RemoteProcess extends EventEmitter implements SpawnedProcess {
  pid: number | undefined;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly stdin: { end(): void };
  /** The spawner process that started it: only that one's end concerns it. */
  readonly owner: ChildProcess;
  exited = false;

  constructor(owner: ChildProcess, stdinEnd: () => void) {
    super();
    this.owner = owner;
    this.stdin = { end: stdinEnd };
    // A caller that does not care how its command ends (renice) must not
    // take the server down when it cannot start: an 'error' with no listener throws.
    this.on('error', () => {});
  }
}

let helper: ChildProcess | undefined;
let nextRef = 1;
const live = new Map<number, RemoteProcess>();

function deliver(msg: SpawnerReply): void {
  const p = live.get(msg.ref);
  if (!p) return;
  switch (msg.op) {
    case 'spawned':
      p.pid = msg.pid;
      p.emit('spawn');
      break;
    case 'data':
      p[msg.stream].write(Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength));
      break;
    case 'end':
      p[msg.stream].end();
      break;
    case 'error':
      p.emit('error', Object.assign(new Error(msg.message), { code: msg.code }));
      // A process that never started gets no exit or close: it is done.
      if (p.pid === undefined) forget(msg.ref);
      break;
    case 'exit':
      p.exited = true;
      p.emit('exit', msg.code, msg.signal);
      break;
    case 'close':
      forget(msg.ref);
      p.emit('close');
      break;
  }
}

function forget(ref: number): void {
  live.delete(ref);
  unrefWhenIdle();
}

/** Nothing running: the helper must not keep a process (a test, a CLI) alive. */
function unrefWhenIdle(): void {
  if (live.size > 0) return;
  helper?.unref();
  helper?.channel?.unref();
}

/**
 * A spawner process is gone (killed, out of memory; its channel closing is
 * the sign): the processes it started lost their stdin and are ending. Make
 * sure, and say so. Only its own: a new spawner may already be starting
 * others.
 */
function helperLost(proc: ChildProcess): void {
  if (helper === proc) helper = undefined;
  for (const [ref, p] of [...live]) {
    if (p.owner !== proc) continue;
    live.delete(ref);
    // One that has exited was reaped already: its pid may be another process's by now.
    if (p.pid !== undefined && !p.exited) {
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {}
    }
    if (!p.stdout.writableEnded) p.stdout.end();
    if (!p.stderr.writableEnded) p.stderr.end();
    if (p.pid === undefined) p.emit('error', new Error('the process spawner exited before the process was started'));
    else if (!p.exited) {
      p.exited = true;
      p.emit('exit', null, 'SIGKILL');
    }
    p.emit('close');
  }
  unrefWhenIdle();
}

function ensureHelper(): ChildProcess {
  if (helper?.connected) return helper;
  const proc = spawn(process.execPath, [ENTRY], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  proc.on('message', (m: SpawnerReply) => deliver(m));
  // 'disconnect' comes first (before 'exit'), and from then on a spawn goes to a new spawner.
  let lost = false;
  const onLost = () => {
    if (lost) return;
    lost = true;
    proc.unref();
    helperLost(proc);
  };
  proc.once('disconnect', onLost);
  proc.once('exit', onLost);
  proc.once('error', onLost);
  helper = proc;
  return proc;
}

/** The spawner process's pid, while one runs (for tests that make it die). */
export function spawnerPid(): number | undefined {
  return helper?.connected ? helper.pid : undefined;
}

function request(proc: ChildProcess, req: SpawnerRequest): void {
  if (proc.connected) proc.send(req);
}

/**
 * `argv` started in a session of its own (as spawn's `detached`), with
 * stdin, stdout and stderr piped, by the spawner process.
 */
export function spawnProcess(argv: string[], opts: { env: Record<string, string>; cwd: string }): SpawnedProcess {
  const proc = ensureHelper();
  proc.ref();
  proc.channel?.ref();
  const ref = nextRef++;
  const p = new RemoteProcess(proc, () => request(proc, { op: 'stdin-end', ref }));
  live.set(ref, p);
  request(proc, { op: 'spawn', ref, argv, env: opts.env, cwd: opts.cwd });
  return p;
}
