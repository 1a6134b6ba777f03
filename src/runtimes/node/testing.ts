// Test helpers: run the real worker as a child process on a Unix socket in a
// temp dir, and talk HTTP to it. Not a test file itself.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const SERVER_ENTRY = path.join(import.meta.dirname, 'server.ts');

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
  json: any;
}

export interface RequestOptions {
  method?: string;
  headers?: http.OutgoingHttpHeaders;
  body?: string | Buffer;
  agent?: http.Agent;
}

export function request(socketPath: string, urlPath: string, opts: RequestOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: urlPath, method: opts.method ?? 'GET', headers: opts.headers, agent: opts.agent ?? false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        const text = body.toString('utf8');
        let json: any;
        try {
          json = JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json });
      });
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

export interface RunningRuntime {
  dir: string;
  socket: string;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Writes files (relative path -> content) under the temp dir; returns the dir. */
  write(files: Record<string, string>, sub?: string): string;
  request(urlPath: string, opts?: RequestOptions): Promise<Reply>;
  specialize(body: unknown): Promise<Reply>;
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

export async function startRuntime(env: Record<string, string> = {}): Promise<RunningRuntime> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-rt-'));
  const socket = path.join(dir, 'rt.sock');
  const userfunc = path.join(dir, 'userfunc');
  fs.mkdirSync(userfunc);
  const child = spawn(process.execPath, [SERVER_ENTRY], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', FLINT_SOCKET: socket, FLINT_USERFUNC_DIR: userfunc, ...env },
    cwd: dir,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (err += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const rt: RunningRuntime = {
    dir,
    socket,
    child,
    stdout: () => out,
    stderr: () => err,
    write(files, sub = 'userfunc') {
      const base = path.join(dir, sub);
      for (const [rel, content] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(base, rel)), { recursive: true });
        fs.writeFileSync(path.join(base, rel), content);
      }
      return base;
    },
    request: (urlPath, opts) => request(socket, urlPath, opts),
    specialize: (body) =>
      request(socket, '/v2/specialize', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  // Ready once the health probe answers; a runtime that dies first fails the test with its stderr.
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`runtime exited with ${child.exitCode}: ${err}`);
    try {
      if ((await rt.request('/healthz')).status === 200) return rt;
    } catch {}
    if (i > 500) {
      await rt.stop();
      throw new Error(`runtime did not answer /healthz: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}


/**
 * A TCP listener on the loopback that forwards each connection to the
 * worker's Unix socket, for clients that only speak TCP (Node's WebSocket).
 */
export async function tcpProxy(socketPath: string): Promise<{ port: number; close(): void }> {
  const open = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (down) => {
    const up = net.connect(socketPath);
    for (const s of [down, up]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => {
        down.destroy();
        up.destroy();
      });
    }
    // pipe() passes each side's end on, so a half-close reaches the other end.
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close() {
      server.close();
      for (const s of open) s.destroy();
    },
  };
}
