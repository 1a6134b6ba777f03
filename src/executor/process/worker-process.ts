// One worker process: started generic, probed until it answers /healthz,
// specialized once, killed when the executor is done with it.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { FlintError } from '../../api/errors.ts';
import type { RuntimeName } from '../../api/images.ts';
import { BWRAP, bwrapArgs, SANDBOX_PATHS } from './sandbox.ts';

const RUNTIME_DIRS: Partial<Record<RuntimeName, { dir: string; entry: string }>> = {
  node: { dir: path.resolve(import.meta.dirname, '../../runtimes/node'), entry: 'server.ts' },
};

export interface WorkerOptions {
  id: string;
  runtime: RuntimeName;
  instanceDir: string;
  sandbox: 'bubblewrap' | 'none';
  allowNetwork: boolean;
  memoryMB: number;
  env?: Record<string, string>;
  onOutput(line: string, stream: 'stdout' | 'stderr'): void;
  startTimeoutMs?: number;
}

export interface WorkerDirs {
  userfunc: string;
  secrets: string;
  configs: string;
}

export interface SpecializeRequest {
  filepath: string;
  functionName?: string;
  env?: Record<string, string>;
}

export interface WorkerHandle {
  readonly id: string;
  readonly pid: number;
  readonly socketPath: string;
  readonly hostDirs: WorkerDirs;
  readonly sandboxDirs: WorkerDirs;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  isAlive(): boolean;
  specialize(req: SpecializeRequest, timeoutMs: number): Promise<void>;
  kill(): Promise<void>;
}

/** One request over the worker's socket; resolves with status and body text. */
function socketRequest(socketPath: string, method: string, urlPath: string, body: string | undefined, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, method, path: urlPath, headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

export async function startWorker(opts: WorkerOptions): Promise<WorkerHandle> {
  const rt = RUNTIME_DIRS[opts.runtime];
  if (!rt) throw new FlintError('FLINT_ERR_UNAVAILABLE', `the ${opts.runtime} runtime is not available in local mode yet`);
  const hostDirs: WorkerDirs = {
    userfunc: path.join(opts.instanceDir, 'userfunc'),
    secrets: path.join(opts.instanceDir, 'secrets'),
    configs: path.join(opts.instanceDir, 'configs'),
  };
  for (const d of Object.values(hostDirs)) fs.mkdirSync(d, { recursive: true });
  // Unix socket paths are limited to ~107 bytes, so the socket lives in a
  // short private directory rather than under a possibly deep data dir.
  const sockDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-w-'));
  const socketPath = path.join(sockDir, 'w.sock');
  const sandboxed = opts.sandbox === 'bubblewrap';
  const sandboxDirs: WorkerDirs = sandboxed
    ? { userfunc: SANDBOX_PATHS.userfunc, secrets: SANDBOX_PATHS.secrets, configs: SANDBOX_PATHS.configs }
    : hostDirs;
  const env: Record<string, string> = {
    HOME: '/tmp',
    PATH: '/usr/local/bin:/usr/bin:/bin',
    NODE_ENV: 'production',
    LANG: 'C.UTF-8',
    FLINT_SOCKET: sandboxed ? `${SANDBOX_PATHS.sock}/w.sock` : socketPath,
    FLINT_USERFUNC_DIR: sandboxDirs.userfunc,
    FLINT_SECRETS_DIR: sandboxDirs.secrets,
    FLINT_CONFIGS_DIR: sandboxDirs.configs,
    ...opts.env,
  };
  const nodeArgs = [`--max-old-space-size=${opts.memoryMB}`, '--disable-warning=ExperimentalWarning'];
  let child: ChildProcess;
  if (sandboxed) {
    const argv = bwrapArgs(
      { nodeBinary: process.execPath, runtimeDir: rt.dir, ...hostDirs, sockDir, allowNetwork: opts.allowNetwork, env },
      [SANDBOX_PATHS.node, ...nodeArgs, `${SANDBOX_PATHS.runtime}/${rt.entry}`],
    );
    child = spawn(BWRAP, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  } else {
    child = spawn(process.execPath, [...nodeArgs, path.join(rt.dir, rt.entry)], { stdio: ['ignore', 'pipe', 'pipe'], env, cwd: os.tmpdir() });
  }
  const tail: string[] = [];
  for (const stream of ['stdout', 'stderr'] as const) {
    readline.createInterface({ input: child[stream]! }).on('line', (line) => {
      if (tail.length >= 20) tail.shift();
      tail.push(line);
      opts.onOutput(line, stream);
    });
  }
  let alive = true;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      alive = false;
      fs.rmSync(sockDir, { recursive: true, force: true });
      resolve({ code, signal });
    });
    child.once('error', () => {
      alive = false;
      resolve({ code: null, signal: null });
    });
  });

  const kill = async () => {
    if (!alive) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 2000);
    await exited;
    clearTimeout(t);
  };

  const deadline = Date.now() + (opts.startTimeoutMs ?? 15_000);
  for (;;) {
    if (!alive) {
      throw new FlintError('FLINT_ERR_UNAVAILABLE', `worker ${opts.id} exited while starting: ${tail.join('\n') || 'no output'}`);
    }
    try {
      const r = await socketRequest(socketPath, 'GET', '/healthz', undefined, 1000);
      if (r.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await kill();
      throw new FlintError('FLINT_ERR_UNAVAILABLE', `worker ${opts.id} did not become healthy in time: ${tail.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 15));
  }

  return {
    id: opts.id,
    pid: child.pid ?? -1,
    socketPath,
    hostDirs,
    sandboxDirs,
    exited,
    isAlive: () => alive,
    async specialize(req, timeoutMs) {
      let r: { status: number; body: string };
      try {
        r = await socketRequest(socketPath, 'POST', '/v2/specialize', JSON.stringify(req), timeoutMs);
      } catch (err) {
        throw new FlintError('FLINT_ERR_SPECIALIZE_FAILED', `specialization failed: ${(err as Error).message}`);
      }
      if (r.status !== 200) {
        let message = r.body;
        try {
          message = JSON.parse(r.body).error ?? r.body;
        } catch {}
        throw new FlintError('FLINT_ERR_SPECIALIZE_FAILED', message);
      }
    },
    kill,
  };
}
