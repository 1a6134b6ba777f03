// The spawner's own process (see spawner.ts): starts the commands the server
// asks for and streams back their output and exit. It holds each child's
// stdin; when the server goes, so does this process, and with it every
// child's stdin, which the runtimes take as the request to stop.
import { type ChildProcess, spawn } from 'node:child_process';
import type { SpawnerReply, SpawnerRequest } from './spawner-protocol.ts';

const children = new Map<number, ChildProcess>();

function send(reply: SpawnerReply): void {
  if (process.connected) process.send!(reply);
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
    child[stream]!.on('data', (data: Buffer) => send({ op: 'data', ref: req.ref, stream, data }));
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
