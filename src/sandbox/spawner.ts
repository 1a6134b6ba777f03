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
  closed = false;

  constructor(stdinEnd: () => void) {
    super();
    this.stdin = { end: stdinEnd };
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
      p.emit('exit', msg.code, msg.signal);
      break;
    case 'close':
      forget(msg.ref);
      p.closed = true;
      p.emit('close');
      break;
  }
}

function forget(ref: number): void {
  live.delete(ref);
  if (live.size === 0) {
    // Nothing running: the helper must not keep a process (a test, a CLI) alive.
    helper?.unref();
    helper?.channel?.unref();
  }
}

/** The helper died (killed, out of memory): its children lost their stdin and are ending; make sure, and say so. */
function helperLost(proc: ChildProcess): void {
  if (helper === proc) helper = undefined;
  for (const [ref, p] of [...live]) {
    live.delete(ref);
    if (p.pid !== undefined) {
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {}
    }
    if (!p.stdout.writableEnded) p.stdout.end();
    if (!p.stderr.writableEnded) p.stderr.end();
    if (p.pid === undefined) p.emit('error', new Error('the process spawner exited before the process was started'));
    else p.emit('exit', null, 'SIGKILL');
    p.closed = true;
    p.emit('close');
  }
}

function ensureHelper(): ChildProcess {
  if (helper?.connected) return helper;
  const proc = spawn(process.execPath, [ENTRY], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  proc.on('message', (m: SpawnerReply) => deliver(m));
  proc.once('exit', () => helperLost(proc));
  proc.once('error', () => helperLost(proc));
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
  const p = new RemoteProcess(() => request(proc, { op: 'stdin-end', ref }));
  live.set(ref, p);
  request(proc, { op: 'spawn', ref, argv, env: opts.env, cwd: opts.cwd });
  return p;
}
