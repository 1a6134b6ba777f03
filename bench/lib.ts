// Measurement helpers shared by the benchmarks. Every benchmark compares
// against a baseline measured in the same run, on the same machine, so the
// ratios mean something even on a noisy 2-core box.
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Pool } from 'undici';

const run = promisify(execFile);

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  count: number;
}

export function percentiles(samplesUs: number[]): Percentiles {
  const s = [...samplesUs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), count: s.length };
}

/** The middle value (the mean of the two middle ones for an even count); NaN for none. */
export function median(xs: number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** A figure over rounds: its median, and the smallest and largest round. */
export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function spread(xs: number[]): Spread {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

/** `median (min-max)`, each number written by `f`: how the tables give a figure over rounds. */
export function spreadText(s: Spread, f: (n: number) => string, sep = '-'): string {
  return `${f(s.median)} (${f(s.min)}${sep}${f(s.max)})`;
}

/** Creates a resource in namespace default through the controller's API; throws unless it was created. */
export async function createResource(controllerUrl: string, plural: string, body: unknown, token?: string): Promise<void> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${controllerUrl}/v1/namespaces/default/${plural}`, { method: 'POST', headers, body: JSON.stringify(body) });
  if (res.status !== 201) throw new Error(`create ${plural}: ${res.status} ${await res.text()}`);
}

/** The hello function every latency figure calls. */
export const HELLO = 'module.exports = async () => ({ status: 200, body: "hello\\n" });';

/** A stored archive, as a package's `deployment` refers to it. */
export interface ArchiveRef {
  type: 'url';
  url: string;
  checksum: { type: 'sha256'; sum: string };
}

/**
 * A package with `code` (or the stored archive `deployment`) and a function
 * `name` of it, in environment `env` (default nodejs).
 */
export async function createFunction(controllerUrl: string, name: string, o: { env?: string; code?: string; deployment?: ArchiveRef; token?: string } = {}): Promise<void> {
  const env = o.env ?? 'nodejs';
  const deployment = o.deployment ?? { type: 'literal', literal: Buffer.from(o.code ?? HELLO).toString('base64') };
  await createResource(controllerUrl, 'packages', { metadata: { name: `${name}-pkg` }, spec: { environment: { name: env }, deployment } }, o.token);
  await createResource(controllerUrl, 'functions', { metadata: { name }, spec: { environment: { name: env }, package: { packageref: { name: `${name}-pkg` } }, requestsPerPod: 1000 } }, o.token);
}

/** Stores `zip` in the server's archive store; the reference a package's source or deployment takes. */
export async function uploadArchive(controllerUrl: string, zip: Buffer): Promise<ArchiveRef> {
  const res = await fetch(`${controllerUrl}/v1/archives`, { method: 'POST', headers: { 'content-type': 'application/zip' }, body: zip });
  if (res.status !== 201) throw new Error(`upload: ${res.status} ${await res.text()}`);
  const { url, checksum } = (await res.json()) as Omit<ArchiveRef, 'type'>;
  return { type: 'url', url, checksum };
}

export interface BuiltPackage {
  spec: { deployment?: ArchiveRef };
  status?: { buildstatus?: string; buildlog?: string };
}

/** The package once its build succeeded; throws with the build log when it failed, or after `timeoutMs`. */
export async function waitBuilt(controllerUrl: string, name: string, timeoutMs = 10 * 60_000): Promise<BuiltPackage> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`${controllerUrl}/v1/namespaces/default/packages/${name}`);
    if (res.status !== 200) throw new Error(`package ${name}: ${res.status} ${await res.text()}`);
    const p = (await res.json()) as BuiltPackage;
    if (p.status?.buildstatus === 'succeeded') return p;
    if (p.status?.buildstatus === 'failed') throw new Error(`build of ${name} failed:\n${p.status.buildlog}`);
    if (Date.now() > deadline) throw new Error(`build of ${name} still ${p.status?.buildstatus} after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Environment nodejs with `poolsize` warm workers, function hello and its route /hello. */
export async function deployHello(controllerUrl: string, poolsize: number, token?: string): Promise<void> {
  await createResource(controllerUrl, 'environments', { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, poolsize } }, token);
  await createFunction(controllerUrl, 'hello', { token });
  await createResource(controllerUrl, 'httptriggers', { metadata: { name: 'hello' }, spec: { relativeurl: '/hello', functionref: { name: 'hello' } } }, token);
}

/** Runs `once` sequentially `n` times after `warmup` calls; returns microseconds. */
export async function sequentialLatency(once: () => Promise<void>, n: number, warmup = Math.min(200, n)): Promise<Percentiles> {
  for (let i = 0; i < warmup; i++) await once();
  const samples: number[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await once();
    samples[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  return percentiles(samples);
}

export interface Interleaved {
  /** Median over the rounds of each side's p50, and of its p99. */
  a: { p50: number; p99: number };
  b: { p50: number; p99: number };
  rounds: number;
}

/**
 * Two latency measurements taken in alternating rounds, so that drift on a
 * busy machine (another process waking up, the CPU's clock) hits both alike.
 */
export async function interleavedLatency(a: () => Promise<void>, b: () => Promise<void>, n: number, rounds = 5): Promise<Interleaved> {
  const per = Math.max(1, Math.floor(n / rounds));
  const ra: Percentiles[] = [];
  const rb: Percentiles[] = [];
  for (let i = 0; i < rounds; i++) {
    ra.push(await sequentialLatency(a, per, 50));
    rb.push(await sequentialLatency(b, per, 50));
  }
  const sum = (ps: Percentiles[]) => ({ p50: median(ps.map((p) => p.p50)), p99: median(ps.map((p) => p.p99)) });
  return { a: sum(ra), b: sum(rb), rounds };
}

/**
 * The first call of a function through the router, in microseconds, on a
 * keep-alive undici pool: the client the fork baselines are timed with, so
 * neither side pays fetch()'s own overhead (milliseconds in a process that has
 * not called fetch much). Throws unless the answer is 200.
 */
export async function timedFirstCall(router: Pool, name: string, since?: bigint): Promise<number> {
  const t0 = since ?? process.hrtime.bigint();
  const res = await router.request({ path: `/flint-function/${name}`, method: 'GET' });
  const text = await res.body.text();
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  if (res.statusCode !== 200) throw new Error(`first call of ${name}: ${res.statusCode} ${text}`);
  return us;
}

/** What /proc counts CPU time in: clock ticks (USER_HZ, 100 on Linux). */
export const TICKS_PER_S = 100;

/**
 * Busy and total ticks of the whole machine, every core (/proc/stat; Linux only), and of those the steal: time a
 * virtual CPU was ready to run but the hypervisor ran something else.
 */
export function machineTicks(): { busy: number; total: number; steal: number } {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = user + nice + system + idle + iowait + irq + softirq + steal;
  return { busy: total - idle - iowait, total, steal };
}

/** The steal's share of the machine's CPU time between two readings, percent; undefined without /proc/stat. */
export function stealPercent(before: ReturnType<typeof machineTicks> | undefined, after: ReturnType<typeof machineTicks> | undefined): number | undefined {
  if (!before || !after || after.total <= before.total) return undefined;
  return (100 * (after.steal - before.steal)) / (after.total - before.total);
}

function machineTicksIfAny(): ReturnType<typeof machineTicks> | undefined {
  try {
    return machineTicks();
  } catch {
    return undefined;
  }
}

/** `body`'s result, and the CPU the whole machine spent while it ran (every process, the kernel's own work too), in ms. */
export async function machineCpuDuring<T>(body: () => Promise<T>): Promise<{ result: T; cpuMs: number }> {
  const before = machineTicks().busy;
  const result = await body();
  return { result, cpuMs: ((machineTicks().busy - before) * 1000) / TICKS_PER_S };
}

export interface WrkResult {
  rps: number;
  /** Responses in all (wrk's "N requests in"), and the 2xx ones per second among them. */
  requests: number;
  goodput: number;
  p50Us: number;
  p99Us: number;
  non2xx: number;
  errors: number;
  /**
   * The hypervisor's steal during the run, percent of the machine's CPU time (undefined where /proc/stat is not):
   * the one part of a shared VM's slowdowns the guest can see, so that a spread over rounds can be told apart from it.
   */
  stealPct?: number;
}

function toUs(text: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(text.trim());
  if (!m) return Number.NaN;
  const v = Number(m[1]);
  return m[2] === 'us' ? v : m[2] === 'ms' ? v * 1000 : v * 1_000_000;
}

export async function hasWrk(): Promise<boolean> {
  try {
    await run('wrk', ['--version']).catch((e) => {
      // wrk --version exits 1 after printing its version.
      if (!String(e.stdout ?? '').includes('wrk')) throw e;
    });
    return true;
  } catch {
    return false;
  }
}

/** Load from a second process (wrk), bounded in time, loopback only. */
export async function wrk(url: string, opts: { seconds: number; connections: number; threads?: number; headers?: string[]; timeoutSeconds?: number; script?: string }): Promise<WrkResult> {
  const args = ['-t', String(opts.threads ?? 1), '-c', String(opts.connections), '-d', `${opts.seconds}s`, '--latency'];
  if (opts.timeoutSeconds !== undefined) args.push('--timeout', `${opts.timeoutSeconds}s`);
  if (opts.script !== undefined) args.push('-s', opts.script);
  for (const h of opts.headers ?? []) args.push('-H', h);
  args.push(url);
  const ticksBefore = machineTicksIfAny();
  const { stdout } = await run('wrk', args, { timeout: (opts.seconds + 30) * 1000 });
  const stealPct = stealPercent(ticksBefore, machineTicksIfAny());
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
  const p50 = /^\s+50%\s+(\S+)/m.exec(stdout)?.[1] ?? '';
  const p99 = /^\s+99%\s+(\S+)/m.exec(stdout)?.[1] ?? '';
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(stdout)?.[1] ?? 0);
  const errLine = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  const errors = errLine ? errLine.slice(1).reduce((a, b) => a + Number(b), 0) : 0;
  const requests = Number(/(\d+) requests in ([\d.]+)(ms|s|m)/.exec(stdout)?.[1] ?? 0);
  const took = /\d+ requests in ([\d.]+)(ms|s|m)/.exec(stdout);
  const tookS = took ? Number(took[1]) * (took[2] === 'ms' ? 0.001 : took[2] === 'm' ? 60 : 1) : opts.seconds;
  return { rps, requests, goodput: (requests - non2xx) / tookS, p50Us: toUs(p50), p99Us: toUs(p99), non2xx, errors, ...(stealPct === undefined ? {} : { stealPct }) };
}

/**
 * A bare node:http hello server in its own process, on a loopback port: the
 * throughput baseline, and the upstream the peers proxy to. `delayMs` makes
 * it answer after a timer instead (bench/overload.ts's slow function's twin).
 */
export async function startBareServer(o: { delayMs?: number; body?: string } = {}): Promise<{ url: string; port: number; stop(): Promise<void> }> {
  const answer = `res.writeHead(200, {'content-type': 'text/plain'}); res.end(${JSON.stringify(o.body ?? 'hello\n')});`;
  const handler = o.delayMs === undefined ? `(req, res) => { ${answer} }` : `(req, res) => setTimeout(() => { ${answer} }, ${o.delayMs})`;
  const code = `
    const http = require('node:http');
    const s = http.createServer(${handler});
    s.keepAliveTimeout = 60000;
    s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  const port = Number(chunk.toString().trim());
  return {
    url: `http://127.0.0.1:${port}/`,
    port,
    async stop() {
      child.kill();
      await once(child, 'exit');
    },
  };
}

/** Waits until `url` answers 200 (10 s at most). */
export async function waitFor200(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const r = await fetch(url).catch(() => undefined);
    if (r?.status === 200) {
      await r.text();
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} never answered 200`);
}

export function fmt(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toFixed(digits) : 'n/a';
}

/**
 * Microseconds from spawning `command` (or from `since`, a burst's start)
 * until it has answered one HTTP request on the Unix socket `sock`: the
 * cold-start baselines. The child prints a line once it listens; the request
 * follows at once (on a new connection: a fresh server has none), so no
 * polling adds to the figure. Node spawns synchronously, one child after
 * another, so in a burst of forks the last starts well after the first:
 * timed from `since`, that wait counts, as the server's own spawning does
 * in a storm's calls.
 */
export async function forkUntilServed(command: string, args: string[], sock: string, since?: bigint): Promise<number> {
  const t0 = since ?? process.hrtime.bigint();
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const listening = once(child.stdout!, 'data');
    const exited = once(child, 'exit').then(([code]) => {
      throw new Error(`${command} exited with ${code} before it listened`);
    });
    await Promise.race([listening, exited]);
    const pool = new Pool('http://localhost', { socketPath: sock });
    const r = await pool.request({ path: '/', method: 'GET' });
    await r.body.text();
    const us = Number(process.hrtime.bigint() - t0) / 1000;
    await pool.close();
    return us;
  } finally {
    child.kill();
  }
}

/** The argv of a node process that serves hello on Unix socket `sock` and says `listening` on stdout first; `bin` maps the node binary's path (a sandbox shows it elsewhere). */
export function nodeHelloArgv(sock: string, bin: (hostPath: string) => string = (p) => p): string[] {
  const code = `require('node:http').createServer((q, s) => s.end('hello')).listen(${JSON.stringify(sock)}, () => process.stdout.write('listening\\n'))`;
  return [bin(process.execPath), '-e', code];
}

/** A fresh node process until it has answered one HTTP request on a Unix socket `name`.sock in `dir`: the Node cold-start baseline. */
export function forkNodeOnce(dir: string, name: string, since?: bigint): Promise<number> {
  const sock = path.join(dir, `${name}.sock`);
  const [command, ...args] = nodeHelloArgv(sock);
  return forkUntilServed(command, args, sock, since);
}

/** The argv of a python3 process that serves hello once on Unix socket `sock` and says `listening` on stdout first. */
export function pythonHelloArgv(sock: string): string[] {
  const code = `import http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header('Content-Length', '5'); self.end_headers(); self.wfile.write(b'hello')
    def log_message(self, *a): pass
s = socketserver.UnixStreamServer(${JSON.stringify(sock)}, H)
print('listening', flush=True)
s.handle_request()`;
  return ['/usr/bin/python3', '-c', code];
}

/** A fresh python3 until it has answered one HTTP request on a Unix socket `name`.sock in `dir`: the Python cold-start baseline. */
export function forkPythonOnce(dir: string, name: string, since?: bigint): Promise<number> {
  const sock = path.join(dir, `${name}.sock`);
  const [command, ...args] = pythonHelloArgv(sock);
  return forkUntilServed(command, args, sock, since);
}
