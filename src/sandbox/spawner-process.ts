// The spawner's own process (see spawner.ts): starts the commands the server
// asks for and streams back their output and exit. It holds each child's
// stdin; when the server goes, so does this process, and with it every
// child's stdin, which the runtimes take as the request to stop.
import { type ChildProcess, spawn } from 'node:child_process';
import type { SpawnerReply, SpawnerRequest } from './spawner-protocol.ts';

const children = new Map<number, ChildProcess>();

// Output on its way to the server, in bytes. Past HIGH the children's output
// streams pause, so their pipes fill and a function that prints without end
// blocks in its own write, as it did when the server read its pipes itself;
// nothing queues here without bound. Below LOW they go on.
const HIGH = 4 * 1024 * 1024;
const LOW = 1024 * 1024;
let pending = 0;
const paused = new Set<NodeJS.ReadableStream>();

function send(reply: SpawnerReply, bytes = 0): void {
  if (!process.connected) return;
  pending += bytes;
  process.send!(reply, undefined, undefined, () => {
    pending -= bytes;
    if (pending < LOW && paused.size > 0) {
      for (const s of paused) s.resume();
      paused.clear();
    }
  });
}

function start(req: Extract<SpawnerRequest, { op: 'spawn' }>): void {
  let child: ChildProcess;
  try {
    child = spawn(req.argv[0], req.argv.slice(1), { env: req.env, cwd: req.cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  } catch (err) {
    send({ op: 'error', ref: req.ref, message: (err as Error).message, code: (err as NodeJS.ErrnoException).code });
    return;
  }
  children.set(req.ref, child);
  child.stdin!.on('error', () => {});
  if (child.pid !== undefined) send({ op: 'spawned', ref: req.ref, pid: child.pid });
  for (const stream of ['stdout', 'stderr'] as const) {
    const out = child[stream]!;
    out.on('data', (data: Buffer) => {
      send({ op: 'data', ref: req.ref, stream, data }, data.length);
      if (pending > HIGH) {
        out.pause();
        paused.add(out);
      }
    });
    child[stream]!.on('end', () => send({ op: 'end', ref: req.ref, stream }));
  }
  child.once('error', (err) => send({ op: 'error', ref: req.ref, message: err.message, code: (err as NodeJS.ErrnoException).code }));
  child.once('exit', (code, signal) => send({ op: 'exit', ref: req.ref, code, signal }));
  child.once('close', () => {
    children.delete(req.ref);
    send({ op: 'close', ref: req.ref });
  });
}

process.on('message', (req: SpawnerRequest) => {
  if (req.op === 'spawn') start(req);
  else if (req.op === 'stdin-end') children.get(req.ref)?.stdin?.end();
});
// The server is gone: let every child see its stdin end, and go too.
process.on('disconnect', () => {
  for (const c of children.values()) c.stdin?.destroy();
  process.exit(0);
});
