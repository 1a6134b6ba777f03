// Cold-start storms: the first calls of N different functions at once, as a
// ratio of N concurrent forks of a plain runtime process that each serve one
// request (what a user's own "start a process per function" would cost on the
// same machine, in the same run). A single cold start from the warm pool is
// cheap (bench/run.ts); a burst of them is what finds an empty pool.
//
// Run alone: `node bench/storm.ts [N ...]` (default 20 100), the runtimes
// `STORM_RUNTIMES=node,python,go` (default all three).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { ensureGoModuleBinary, type GoModule } from '../scripts/go-module.ts';
import { findGo } from '../src/runtimes/go/launch.ts';
import { SANDBOX_PATHS, SANDBOX_UID, type SandboxBind, sandboxBinaryPath, sandboxCommand } from '../src/sandbox/bwrap.ts';
import { startServer, type TestServer } from '../test/helpers/server.ts';
import { readKnobs } from './knobs.ts';
import {
  type ArchiveRef,
  createFunction,
  createResource,
  fmt,
  forkUntilServed,
  machineCpuDuring,
  nodeHelloArgv,
  percentiles,
  pythonHelloArgv,
  timedFirstCall,
  uploadArchive,
  waitBuilt,
} from './lib.ts';
import type { StormResult } from './results.ts';

type Sandbox = 'bubblewrap' | 'none';

export interface StormRuntime {
  name: 'node' | 'python' | 'go';
  image: string;
  /** What the baseline forks, for the rows. */
  forkName: string;
  /**
   * Made ready once, before its storms: what its deploys and forks need (a
   * toolchain's build). Throws to skip the runtime, saying why.
   */
  prepare?(sandbox: Sandbox): Promise<void>;
  /** A package and a function of environment `env` for each of `names`, on `server`. */
  deploy(server: TestServer, env: string, names: string[]): Promise<void>;
  /**
   * The baseline fork: a plain process of the runtime that serves one request on Unix socket `sock`, saying
   * `listening` on stdout once it listens. `bin` gives where the process sees a host binary (a sandbox shows
   * binaries outside /usr elsewhere).
   */
  forkArgv(sock: string, bin: (hostPath: string) => string): string[];
  /** Host binaries outside /usr the fork runs: what a sandbox must show it. */
  forkBinaries(): string[];
}

/** Each function a package of its own with `code` as its deployment, nothing to build. */
const literalDeploys = (code: string) => async (server: TestServer, env: string, names: string[]) => {
  for (const name of names) await createFunction(server.controllerUrl, name, { env, code });
};

const NODE: StormRuntime = {
  name: 'node',
  image: 'flint/node-env',
  forkName: 'node',
  deploy: literalDeploys('module.exports = async () => ({ status: 200, body: "hello\\n" });'),
  forkArgv: (sock, bin) => nodeHelloArgv(sock, bin),
  forkBinaries: () => [process.execPath],
};

const PYTHON: StormRuntime = {
  name: 'python',
  image: 'flint/python-env',
  forkName: 'python3',
  deploy: literalDeploys('def main():\n    return "hello"\n'),
  forkArgv: (sock) => pythonHelloArgv(sock),
  forkBinaries: () => [],
};

/** The plain Go program the Go storms' forks run (bench/storm/go-hello). */
export const GO_HELLO_MODULE: GoModule = {
  dir: path.join(import.meta.dirname, 'storm', 'go-hello'),
  files: ['go.mod', 'main.go'],
  cacheName: 'bench-go-hello',
  binary: 'gohello',
  what: "the Go storms' baseline program (bench/storm/go-hello)",
  env: { CGO_ENABLED: '0', GOFLAGS: '-mod=mod' },
};

const GO_FUNCTION = 'package main\n\nimport "net/http"\n\nfunc Handler(w http.ResponseWriter, r *http.Request) {\n\tw.Write([]byte("hello\\n"))\n}\n';

/**
 * A Go function is an executable that must be built, and each storm's server
 * starts with an empty build cache, where the first build compiles the
 * standard library (most of a minute on 2 cores). So the function is built
 * once, through a server's own builder, and every storm function gets a
 * package of its own whose deployment is that build's archive, uploaded to
 * the storm's server: what specializing an instance does (fetch, unpack, exec
 * the executable) is done per function, as for Node and Python.
 */
function goRuntime(): StormRuntime {
  // Set by prepare() and read by every storm after it: one bench run prepares once, then runs its storms in turn.
  let executable: Buffer | undefined;
  let gohello: string | undefined;
  const uploaded = new WeakMap<TestServer, ArchiveRef>();
  return {
    name: 'go',
    image: 'flint/go-env',
    forkName: 'go (a plain net/http program)',
    async prepare(sandbox) {
      const go = findGo();
      if (go === undefined) throw new Error('no Go toolchain (go on PATH or /usr/local/go/bin/go)');
      gohello = ensureGoModuleBinary(GO_HELLO_MODULE, go);
      const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error'] });
      try {
        await createResource(server.controllerUrl, 'environments', { metadata: { name: 'go' }, spec: { runtime: { image: 'flint/go-env' }, builder: { image: 'flint/go-builder' }, poolsize: 1 } });
        await createResource(server.controllerUrl, 'packages', {
          metadata: { name: 'storm-go' },
          spec: { environment: { name: 'go' }, source: { type: 'literal', literal: Buffer.from(GO_FUNCTION).toString('base64') } },
        });
        const built = await waitBuilt(server.controllerUrl, 'storm-go', 20 * 60_000);
        const sum = built.spec.deployment?.checksum?.sum;
        if (sum === undefined) throw new Error('the Go build succeeded without a deployment archive');
        const res = await fetch(`${server.controllerUrl}/v1/archives/${sum}`);
        if (res.status !== 200) throw new Error(`download of the built function: ${res.status} ${await res.text()}`);
        executable = Buffer.from(await res.arrayBuffer());
      } finally {
        await server.stop();
      }
    },
    async deploy(server, env, names) {
      if (executable === undefined) throw new Error('the Go storm runtime was not prepared');
      let deployment = uploaded.get(server);
      if (deployment === undefined) {
        deployment = await uploadArchive(server.controllerUrl, executable);
        uploaded.set(server, deployment);
      }
      for (const name of names) await createFunction(server.controllerUrl, name, { env, deployment });
    },
    forkArgv(sock, bin) {
      if (gohello === undefined) throw new Error('the Go storm runtime was not prepared');
      return [bin(gohello), sock];
    },
    forkBinaries: () => (gohello === undefined ? [] : [gohello]),
  };
}

export const STORM_RUNTIMES = { node: NODE, python: PYTHON, go: goRuntime() };

async function settle(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** A gauge's value from a Prometheus text exposition, or undefined when absent. */
function gauge(text: string, name: string, labels: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/**
 * Until no worker is starting or waiting to, and `env`'s warm pool has held the same count for a second: the pool
 * grows ahead for new functions (docs/executor.md), and nothing is timed while it does (60 s at most).
 */
async function untilPoolSettled(server: TestServer, env: string): Promise<void> {
  let last: number | undefined;
  let same = 0;
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
    // The executor's gauges are the control plane's, not the router's.
    const text = await fetch(`${server.controllerUrl}/metrics`).then((r) => r.text());
    const starting = gauge(text, 'flint_executor_worker_starts', 'state="starting"');
    const waiting = gauge(text, 'flint_executor_worker_starts', 'state="waiting"');
    const idle = gauge(text, 'flint_executor_warm_workers', `environment="default/${env}"`);
    if (starting === undefined || waiting === undefined || idle === undefined) throw new Error(`no executor gauges for ${env} in the control plane's /metrics`);
    const busy = starting + waiting;
    same = busy === 0 && idle === last ? same + 1 : 0;
    if (same >= 5) return;
    last = idle;
    await settle(200);
  }
  throw new Error(`the warm pool of ${env} did not settle within 60 s`);
}

/** The first calls of `names` all at once. */
async function burst(server: TestServer, names: string[]): Promise<{ calls: number[]; failed: number; firstError?: string; cpuMsPerCall: number }> {
  const router = new Pool(server.routerUrl, { connections: names.length, pipelining: 0 });
  const calls: number[] = [];
  let failed = 0;
  let firstError: string | undefined;
  let cpuMs: number;
  try {
    ({ cpuMs } = await machineCpuDuring(() => {
      const since = process.hrtime.bigint();
      return Promise.all(
        names.map(async (name) => {
          try {
            calls.push(await timedFirstCall(router, name, since));
          } catch (err) {
            failed++;
            firstError ??= (err as Error).message;
          }
        }),
      );
    }));
  } finally {
    await router.close();
  }
  return { calls, failed, firstError, cpuMsPerCall: cpuMs / names.length };
}

/** Each storm worker's memory, MiB: so that 100 fit the derived instance budget of a small machine. */
const WORKER_MB = 128;

/**
 * What a sandboxed fork is shown besides its socket's directory: empty stand-ins for what a worker's sandbox
 * binds (its runtime's directory, its code, secrets and configs, the sandbox user's passwd and group), so
 * that bwrap does as many mounts as for a worker. Made once per `dir`.
 */
function standIns(dir: string): { binds: SandboxBind[]; passwd: { passwd: string; group: string } } {
  const root = path.join(dir, 'sandbox-stand-ins');
  const at = (name: string) => path.join(root, name);
  if (!fs.existsSync(root)) {
    for (const d of ['runtime', 'userfunc', 'secrets', 'configs']) fs.mkdirSync(at(d), { recursive: true });
    fs.writeFileSync(at('passwd'), `nobody:x:${SANDBOX_UID}:${SANDBOX_UID}:nobody:/tmp:/usr/sbin/nologin\n`);
    fs.writeFileSync(at('group'), `nogroup:x:${SANDBOX_UID}:\n`);
  }
  return {
    binds: [
      { host: at('runtime'), at: SANDBOX_PATHS.runtime },
      { host: at('userfunc'), at: SANDBOX_PATHS.userfunc },
      { host: at('secrets'), at: SANDBOX_PATHS.secrets },
      { host: at('configs'), at: SANDBOX_PATHS.configs },
    ],
    passwd: { passwd: at('passwd'), group: at('group') },
  };
}

/**
 * One baseline fork until it has served a request, timed from `since`, the burst's start. `sandboxed`: inside
 * Flint's own sandbox, with a worker's bwrap flags and as many binds (no network, its own /tmp, the socket's
 * directory its one writable place), without the worker's cgroups and without Flint: what the sandbox alone
 * adds to a process start.
 */
export function forkOnce(rt: StormRuntime, dir: string, name: string, since: bigint, sandboxed: boolean): Promise<number> {
  const sock = path.join(dir, `${name}.sock`);
  let argv: string[];
  if (sandboxed) {
    const { binds, passwd } = standIns(dir);
    argv = sandboxCommand(
      { binds: [...binds, { host: dir, at: SANDBOX_PATHS.sock, writable: true }], binaries: rt.forkBinaries(), passwd, tmpSizeBytes: WORKER_MB * 1024 * 1024, hostname: 'storm' },
      rt.forkArgv(path.posix.join(SANDBOX_PATHS.sock, `${name}.sock`), sandboxBinaryPath),
    );
  } else argv = rt.forkArgv(sock, (p) => p);
  const [command, ...args] = argv;
  return forkUntilServed(command, args, sock, since);
}

/**
 * N functions of `rt`'s environment (fresh, pool of its default size), then
 * all N first calls at once; then N more functions and their first calls at
 * once, while the pool still remembers the first burst; and N forks at once
 * (before the bursts in odd rounds, after them in even ones).
 */
export async function storm(server: TestServer, rt: StormRuntime, n: number, round: number, work: string, sandboxed = false): Promise<Omit<StormResult, 'round'>[]> {
  const env = `storm-${rt.name}-${n}-${round}`;
  await createResource(server.controllerUrl, 'environments', { metadata: { name: env }, spec: { runtime: { image: rt.image } } });
  const first = Array.from({ length: n }, (_, i) => `${env}-a${i}`);
  const next = Array.from({ length: n }, (_, i) => `${env}-b${i}`);
  await rt.deploy(server, env, first);
  // The pool fills and the deployments unpack before anyone is timed.
  await settle(3000);
  await untilPoolSettled(server, env);
  const forkAll = async (inSandbox: boolean) => {
    const { result, cpuMs } = await machineCpuDuring(() => {
      const since = process.hrtime.bigint();
      return Promise.all(first.map((_, i) => forkOnce(rt, work, `storm-${rt.name}-${round}-${inSandbox ? 'sandboxed-' : ''}${i}`, since, inSandbox)));
    });
    return { times: result, cpuMsPerFork: cpuMs / n };
  };
  // The plain forks and, with the sandbox, the sandboxed ones, which go first every other pair of rounds. A failure
  // of the sandboxed ones is said in the row; it does not cost the storm and the plain forks, which the target is of.
  const baselines = async (): Promise<Pick<StormResult, 'forks' | 'cpuMsPerFork' | 'sandboxedForks' | 'cpuMsPerSandboxedFork' | 'sandboxedError'>> => {
    const plainForks = async () => {
      const r = await forkAll(false);
      return { forks: r.times, cpuMsPerFork: r.cpuMsPerFork };
    };
    if (!sandboxed) return plainForks();
    const inSandbox = async () => {
      try {
        const r = await forkAll(true);
        return { sandboxedForks: r.times, cpuMsPerSandboxedFork: r.cpuMsPerFork };
      } catch (err) {
        return { sandboxedError: (err as Error).message };
      }
    };
    const before = Math.floor(round / 2) % 2 === 1 ? await inSandbox() : undefined;
    if (before !== undefined) await settle(1500);
    const plain = await plainForks();
    if (before !== undefined) return { ...plain, ...before };
    await settle(1500);
    return { ...plain, ...(await inSandbox()) };
  };
  const baselinesFirst = round % 2 === 1;
  const early = baselinesFirst ? await baselines() : undefined;
  if (baselinesFirst) await settle(1500);
  const a = await burst(server, first);
  await rt.deploy(server, env, next);
  // The grown pool refills (in the background, at the lower priority) before the next burst.
  await settle(Number(process.env.STORM_REFILL_MS ?? 10_000));
  await untilPoolSettled(server, env);
  const b = await burst(server, next);
  let baseline = early;
  if (baseline === undefined) {
    await settle(3000);
    baseline = await baselines();
  }
  return [
    { runtime: rt.name, forkName: rt.forkName, n, burst: 'first', ...baseline, ...a },
    { runtime: rt.name, forkName: rt.forkName, n, burst: 'next', ...baseline, ...b },
  ];
}

/** A storm's p50 over its forks' p50. */
export const stormRatio = (r: StormResult, forks: number[] = r.forks) => (r.calls.length > 0 && forks.length > 0 ? percentiles(r.calls).p50 / percentiles(forks).p50 : Number.NaN);

/**
 * The median round's forks inside the sandbox and the storm over them, with that ratio's range over `rounds`;
 * or why they failed. Empty where the sandbox was off.
 */
function sandboxedText(mid: StormResult, rounds: StormResult[]): string {
  const error = rounds.find((r) => r.sandboxedError)?.sandboxedError;
  const failedText = error === undefined ? '' : `; forks in Flint's sandbox failed: ${error}`;
  const times = mid.sandboxedForks;
  if (times === undefined || times.length === 0) return failedText;
  const s = percentiles(times);
  const ratios = rounds.map((r) => stormRatio(r, r.sandboxedForks ?? [])).filter((x) => Number.isFinite(x));
  const spread = ratios.length > 1 ? `, ${fmt(Math.min(...ratios), 2)}-${fmt(Math.max(...ratios), 2)}x over ${ratios.length} rounds` : '';
  return `; forks in Flint's sandbox p50 ${fmt(s.p50 / 1000, 0)} ms, p99 ${fmt(s.p99 / 1000, 0)} ms, machine CPU per fork ${fmt(mid.cpuMsPerSandboxedFork ?? Number.NaN, 0)} ms (storm / sandboxed forks ${fmt(stormRatio(mid, times), 2)}x${spread})${failedText}`;
}

/** One row per runtime, size and burst: the round with the median ratio, and the ratios of all rounds. */
export function stormRows(results: StormResult[]): string[][] {
  const groups = new Map<string, StormResult[]>();
  for (const r of results) {
    const key = `${r.runtime}/${r.n}/${r.burst}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return [...groups.values()].map((rounds) => {
    const failed = rounds.reduce((a, r) => a + r.failed, 0);
    // A round whose calls all failed has no ratio: the median is of the others (its failures are counted above).
    const measured = rounds.filter((r) => Number.isFinite(stormRatio(r)));
    const byRatio = (measured.length > 0 ? measured : rounds).sort((a, b) => stormRatio(a) - stormRatio(b));
    const mid = byRatio[(byRatio.length - 1) >> 1];
    const { runtime, n, burst } = mid;
    const c = percentiles(mid.calls);
    const f = percentiles(mid.forks);
    const ratios = measured.map((r) => stormRatio(r));
    const which = burst === 'first' ? "a new environment's first burst" : 'the next burst (pool grown)';
    const spreadText = ratios.length > 1 ? ` (${fmt(Math.min(...ratios), 2)}-${fmt(Math.max(...ratios), 2)}x over ${ratios.length} rounds)` : '';
    const firstError = rounds.find((r) => r.firstError)?.firstError;
    const sandboxed = sandboxedText(mid, measured.length > 0 ? measured : rounds);
    return [
      `cold-start storm, ${n} ${runtime} functions at once, ${which} / ${n} concurrent ${mid.forkName ?? runtime} forks`,
      failed > 0 ? `${failed} failed` : `${fmt(stormRatio(mid), 2)}x${spreadText}`,
      `median round: storm p50 ${fmt(c.p50 / 1000, 0)} ms, p99 ${fmt(c.p99 / 1000, 0)} ms; forks p50 ${fmt(f.p50 / 1000, 0)} ms, p99 ${fmt(f.p99 / 1000, 0)} ms; machine CPU per call ${fmt(mid.cpuMsPerCall, 0)} ms, per fork ${fmt(mid.cpuMsPerFork, 0)} ms${sandboxed}${firstError ? `; first error: ${firstError}` : ''}`,
      '≤ 1.0x',
    ];
  });
}

/**
 * Storms of each size for each runtime, each on a server of its own: instances an earlier storm left (up to twice
 * its size, idle but not yet reaped) would otherwise hold the instance budget the next one starts from. A runtime
 * that cannot be made ready (no Go toolchain) gets a row saying so, and the others run.
 */
export async function stormBench(
  sandbox: Sandbox,
  sizes: number[],
  runtimes: StormRuntime[] = Object.values(STORM_RUNTIMES),
  rounds = 1,
): Promise<{ rows: string[][]; results: StormResult[] }> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-storm-'));
  const results: StormResult[] = [];
  const { ready, skipped: notRun } = await prepareRuntimes(runtimes, sandbox);
  const failed: string[][] = [];
  try {
    let seq = 0;
    for (let round = 0; round < rounds; round++) {
      for (const rt of ready) {
        for (const n of sizes) {
          const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error', `executor.memoryMB=${WORKER_MB}`] });
          try {
            for (const r of await storm(server, rt, n, seq++, work, sandbox === 'bubblewrap')) results.push({ ...r, round });
          } catch (err) {
            // One storm that cannot be set up (a deploy refused) costs its own row, not the other runtimes' results.
            failed.push([`cold-start storm, ${n} ${rt.name} functions, round ${round + 1}`, 'failed', String((err as Error).message).slice(0, 600), '≤ 1.0x']);
          } finally {
            await server.stop();
          }
        }
      }
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return { rows: [...stormRows(results), ...failed, ...notRun], results };
}

/** Each runtime made ready (`prepare`), or a row saying why it is skipped. */
export async function prepareRuntimes(runtimes: StormRuntime[], sandbox: Sandbox): Promise<{ ready: StormRuntime[]; skipped: string[][] }> {
  const ready: StormRuntime[] = [];
  const skipped: string[][] = [];
  for (const rt of runtimes) {
    try {
      await rt.prepare?.(sandbox);
      ready.push(rt);
    } catch (err) {
      skipped.push([`cold-start storms, ${rt.name}`, 'skipped', String((err as Error).message).slice(0, 600), '≤ 1.0x']);
    }
  }
  return { ready, skipped };
}

/** The storm sizes and runtimes a command line asks for, or the message that refuses them. */
export function stormArgs(argv: string[], runtimesEnv: string | undefined): { sizes: number[]; runtimes?: StormRuntime[] } | { refused: string } {
  const bad = argv.find((a) => !/^[1-9]\d*$/.test(a));
  if (bad !== undefined) return { refused: `a storm size must be a whole number above 0, not "${bad}" (usage: node bench/storm.ts [N ...])` };
  const sizes = argv.length > 0 ? argv.map(Number) : [20, 100];
  if (runtimesEnv === undefined) return { sizes };
  const runtimes: StormRuntime[] = [];
  for (const name of runtimesEnv.split(',')) {
    const rt = Object.hasOwn(STORM_RUNTIMES, name) ? STORM_RUNTIMES[name as keyof typeof STORM_RUNTIMES] : undefined;
    if (rt === undefined) return { refused: `STORM_RUNTIMES: no runtime "${name}" (${Object.keys(STORM_RUNTIMES).join(', ')})` };
    runtimes.push(rt);
  }
  return { sizes, runtimes };
}

if (import.meta.main) {
  const args = stormArgs(process.argv.slice(2), process.env.STORM_RUNTIMES);
  if ('refused' in args) {
    process.stderr.write(`${args.refused}\n`);
    process.exit(1);
  }
  const knobs = readKnobs();
  const { rows, results } = await stormBench(knobs.sandbox, args.sizes, args.runtimes, knobs.stormRounds);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  const { writeCharts } = await import('./charts.ts');
  for (const file of await writeCharts({ storms: results })) console.log(`chart: ${path.relative(process.cwd(), file)}`);
}
