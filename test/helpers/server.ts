// Starts a real `flint server` as a child process for system tests, on free
// loopback ports and a fresh data directory, and stops it (or kills it).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const REPO = path.resolve(import.meta.dirname, '..', '..');
export const FLINT_BIN = path.join(REPO, 'bin', 'flint.js');

export interface TestServer {
  dataDir: string;
  controllerUrl: string;
  routerUrl: string;
  ingressUrl?: string;
  /** Role executor: its executor service. */
  executorUrl?: string;
  child: ChildProcess;
  /** Everything the server printed so far (stdout and stderr). */
  output(): string;
  stop(): Promise<void>;
  kill(): Promise<void>;
  /** Env for CLI children: FLINT_URL and FLINT_ROUTER_URL point here. */
  env: NodeJS.ProcessEnv;
}

export interface StartOptions {
  dataDir?: string;
  sets?: string[];
  /** Keep the data directory when stopping (restart tests). */
  keepData?: boolean;
  /** A command the server runs under (e.g. setpriv dropping a capability); its own last argument is the server's node. */
  launcher?: string[];
  /** The listeners whose `<name> listening on <url>` lines mean it started (role-split servers run fewer). */
  expect?: string[];
}

export async function startServer(opts: StartOptions = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'flint-sys-'));
  const sets = ['controller.port=0', 'router.port=0', 'ingress.port=0', 'ingress.httpsPort=0', `dataDir=${dataDir}`, 'logLevel=warn', 'executor.reapIntervalSeconds=1', ...(opts.sets ?? [])];
  // FLINT_SERVER_NODE_ARGS passes flags to the server's node (e.g. --cpu-prof when profiling a benchmark).
  const nodeArgs = (process.env.FLINT_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const args = [...nodeArgs, FLINT_BIN, 'server', ...sets.flatMap((s) => ['--set', s])];
  const argv = [...(opts.launcher ?? []), process.execPath, ...args];
  const child = spawn(argv[0], argv.slice(1), { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const started = new Promise<Record<string, string>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${out}`)), 30_000);
    const check = () => {
      const found: Record<string, string> = {};
      for (const m of out.matchAll(/^(\w+) listening on (\S+)$/gm)) found[m[1]] = m[2];
      if ((opts.expect ?? ['controller', 'router']).every((name) => found[name])) {
        clearTimeout(timer);
        resolve(found);
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${out}`));
    });
  });
  const cleanup = () => {
    if (!opts.keepData && !opts.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  };
  let urls: Record<string, string>;
  try {
    urls = await started;
  } catch (err) {
    // A server that refused to start (or did not start in time) leaves nothing behind either.
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
    cleanup();
    throw err;
  }
  return {
    dataDir,
    controllerUrl: urls.controller,
    routerUrl: urls.router,
    ingressUrl: urls.ingress,
    executorUrl: urls.executor,
    child,
    output: () => out,
    env: { ...process.env, FLINT_URL: urls.controller, FLINT_ROUTER_URL: urls.router, FLINT_DATA_DIR: dataDir },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
      cleanup();
    },
    async kill() {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
      cleanup();
    },
  };
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `flint <args>` as a user would, synchronously. */
export function flint(server: { env: NodeJS.ProcessEnv }, args: string[], opts: { cwd?: string; input?: string; env?: NodeJS.ProcessEnv } = {}): CliResult {
  const r = spawnSync(process.execPath, [FLINT_BIN, ...args], {
    cwd: opts.cwd ?? REPO,
    env: { ...server.env, ...opts.env },
    input: opts.input,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Runs `flint <args>` without blocking this process: for tests whose servers (a fake API server, say) run in the
 * test process itself and must keep answering while the CLI waits on them.
 */
export function flintAsync(server: { env: NodeJS.ProcessEnv }, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [FLINT_BIN, ...args], { cwd: opts.cwd ?? REPO, env: { ...server.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

export { eventually } from '../../src/testing/eventually.ts';
