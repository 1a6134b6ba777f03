// Kubernetes mode split into its roles (issue 25), on a real control plane
// with the node agent (test/helpers/split-cluster.ts: one executor, one
// controller, two routers; function pods under bubblewrap on loopback IPs):
//   - throughput of one warm function (hello, requestsPerPod 1000 so one pod
//     takes all the load) through one router vs through two, with the same
//     client (two wrk processes of 16 connections each) in rounds that rotate
//     the order, beside the same clients straight at the pod (podIP:8888);
//     each process's CPU over the run says what limits the figure;
//   - what a call costs when its router holds no grant for an instance that
//     is warm at the executor (one HTTP round trip to the executor leader),
//     against the same router's next call, on a cached grant;
//   - a real cold call (specialization from the warm pool) through a router
//     of the split layout and through a `role=all` server on the same
//     cluster, one layout at a time (split, role=all, split).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import { kubeBinaryPath } from '../scripts/kube/build.ts';
import { descendants } from '../scripts/kube/process-tree.ts';
import { childTicks, cpuTicks } from './proc-cpu.ts';
import { GRANT_IDLE_MS } from '../src/executor/remote/remote-executor.ts';
import { sandboxAvailable } from '../src/sandbox/bwrap.ts';
import { FUNCTION_NAMESPACE, startTestCluster, type TestCluster } from '../test/helpers/kube-cluster.ts';
import { eventually, startServer, type TestServer } from '../test/helpers/server.ts';
import { type SplitCluster, startSplitCluster } from '../test/helpers/split-cluster.ts';
import { createFunction, deployHello, fmt, hasWrk, machineTicks, percentiles, TICKS_PER_S, timedFirstCall, type WrkResult, wrk } from './lib.ts';

const run = promisify(execFile);
const POOL = 3;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loadavg = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(', ');

export interface ScaleOutOptions {
  /** wrk duration of each throughput run, in seconds. */
  seconds: number;
  /** Throughput rounds (each runs direct, one router and two routers once, in rotating order). */
  rounds: number;
  /** Functions whose first calls are the cold figures and whose grants the round-trip figure takes. */
  functions: number;
  /** Rounds of the round-trip figure: the first through router 2 after router 1 made the instances, the rest each after every grant went idle. */
  grantRounds: number;
}

// ---- CPU accounting, from /proc: what each process used of the 2 cores during a run.

/** The control plane's processes (etcd, kube-apiserver, the controller manager, the scheduler): this process's children running the kube binary. */
function controlPlanePids(): number[] {
  return descendants(process.pid).filter((p) => {
    try {
      return fs.readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'kube';
    } catch {
      return false;
    }
  });
}

/**
 * Cores used while `body` runs: by each named process, by wrk (this process's children that exit meanwhile), by
 * this process (the node agent, and the benchmark itself), by everything else (other sessions, the kernel's own work),
 * and by the whole machine.
 */
async function cpuDuring<T>(pids: Record<string, number | number[] | undefined>, body: () => Promise<T>): Promise<{ result: T; cores: Record<string, number>; machine: number }> {
  const read = (): Record<string, number> => ({ ...Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, cpuTicks(p)])), wrk: childTicks(), 'node agent': cpuTicks(process.pid) });
  const before = read();
  const m0 = machineTicks();
  const t0 = process.hrtime.bigint();
  const result = await body();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const after = read();
  const m1 = machineTicks();
  const cores: Record<string, number> = Object.fromEntries(Object.keys(after).map((k) => [k, (after[k] - before[k]) / TICKS_PER_S / seconds]));
  // /proc/stat counts every core: the busy share of all of them, times their number.
  const machine = ((m1.busy - m0.busy) / (m1.total - m0.total)) * os.cpus().length;
  cores.rest = machine - Object.values(cores).reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
  return { result, cores, machine };
}

/** The process listening on a pod's address (the runtime inside its bubblewrap sandbox). */
async function listenerPid(ip: string, port: number): Promise<number | undefined> {
  const { stdout } = await run('ss', ['-Hltnp', 'src', `${ip}:${port}`]).catch(() => ({ stdout: '' }));
  const m = /pid=(\d+)/.exec(stdout);
  return m ? Number(m[1]) : undefined;
}

// ---- the cluster

async function podsOf(cluster: TestCluster, selector: string): Promise<any[]> {
  const out = await cluster.controlPlane.kubectl(['-n', FUNCTION_NAMESPACE, 'get', 'pods', '-l', selector, '-o', 'json']);
  return (JSON.parse(out).items as any[]).filter((p) => !p.metadata.deletionTimestamp);
}

const isReady = (p: any) => (p.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');

/** Until the environment's pool holds POOL ready pods again (a cold call took one), so no pod starts while one is timed. */
async function poolRefilled(cluster: TestCluster): Promise<void> {
  await eventually(async () => ((await podsOf(cluster, 'environmentName=nodejs,managed=true')).filter(isReady).length >= POOL ? true : undefined), 'the warm pool refilled', 120_000, 200);
}

/** Creates `name` and times its first call through `router`: a specialization from the warm pool. */
async function coldCall(cluster: TestCluster, controllerUrl: string, router: Pool, name: string): Promise<number> {
  await createFunction(controllerUrl, name);
  await poolRefilled(cluster);
  // The routers learn of the function through their watch; and the refill's process start has settled.
  await sleep(1000);
  return timedFirstCall(router, name);
}

// ---- the figures

interface Sum {
  rps: number;
  non2xx: number;
  errors: number;
}

/** Two wrk processes at once, 16 connections each: the same client whether they aim at one address or two. */
async function wrkPair(urls: [string, string], seconds: number): Promise<Sum> {
  const rs: WrkResult[] = await Promise.all(urls.map((u) => wrk(u, { seconds, connections: 16 })));
  return { rps: rs[0].rps + rs[1].rps, non2xx: rs[0].non2xx + rs[1].non2xx, errors: rs[0].errors + rs[1].errors };
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const range = (xs: number[]) => `${fmt(Math.min(...xs), 2)}-${fmt(Math.max(...xs), 2)}x`;
const coresText = (c: Record<string, number>, machine: number) => `${Object.entries(c)
  .map(([k, v]) => `${k} ${fmt(v, 2)}`)
  .join(', ')}; machine ${fmt(machine, 2)} of ${os.cpus().length} cores`;

async function throughput(split: SplitCluster, cluster: TestCluster, o: ScaleOutOptions): Promise<string[][]> {
  const [hello] = (await podsOf(cluster, 'functionName=hello')).filter(isReady);
  const ip: string = hello.status.podIP;
  const pod = `http://${ip}:8888/`;
  const [r1, r2] = split.routerUrls.map((u) => `${u}/hello`);
  const pids = {
    'router 1': split.routers[0].child.pid,
    'router 2': split.routers[1].child.pid,
    pod: await listenerPid(ip, 8888),
    executor: split.executors[0].child.pid,
    controller: split.controller.child.pid,
    'control plane': controlPlanePids(),
  };
  const kinds = [
    { name: 'direct', urls: [pod, pod] as [string, string] },
    { name: 'one', urls: [r1, r1] as [string, string] },
    { name: 'two', urls: [r1, r2] as [string, string] },
  ];
  // Warm-up: each path's code optimized, and each router holding the grants 16 connections need.
  for (const k of kinds) await wrkPair(k.urls, 2);
  const runs: Record<string, Array<{ sum: Sum; cores: Record<string, number>; machine: number }>> = { direct: [], one: [], two: [] };
  for (let i = 0; i < o.rounds; i++) {
    for (let j = 0; j < kinds.length; j++) {
      const k = kinds[(i + j) % kinds.length];
      const { result, cores, machine } = await cpuDuring(pids, () => wrkPair(k.urls, o.seconds));
      runs[k.name].push({ sum: result, cores, machine });
    }
  }
  const perRound = (a: string, b: string) => runs[a].map((r, i) => r.sum.rps / runs[b][i].sum.rps);
  const twoOne = perRound('two', 'one');
  const oneDirect = perRound('one', 'direct');
  const twoDirect = perRound('two', 'direct');
  const rps = (k: string) => med(runs[k].map((r) => r.sum.rps));
  const failures = (k: string) => runs[k].reduce((n, r) => n + r.sum.non2xx + r.sum.errors, 0);
  // The CPU of the round with the median rate of each kind.
  const medianRun = (k: string) => [...runs[k]].sort((a, b) => a.sum.rps - b.sum.rps)[Math.floor(runs[k].length / 2)];
  const cpu = (k: string, keys: string[]) => {
    const r = medianRun(k);
    return coresText(Object.fromEntries(keys.map((x) => [x, r.cores[x]])), r.machine);
  };
  // CPU per request of each part, in µs, in the median run: what 2 cores can carry at most.
  const perRequest = (k: string, parts: Record<string, string[]>) => {
    const r = medianRun(k);
    return Object.entries(parts)
      .map(([label, keys]) => `${label} ${fmt((keys.reduce((a, x) => a + r.cores[x], 0) / r.sum.rps) * 1e6)}`)
      .join(', ');
  };
  const how = `median of ${o.rounds} rounds (two wrk × 16 connections, ${o.seconds} s each)`;
  return [
    [
      'scale-out: throughput via 2 routers / via 1 router',
      `${fmt(med(twoOne), 2)}x`,
      `2 routers ${fmt(rps('two'))} req/s (cores: ${cpu('two', ['router 1', 'router 2', 'pod', 'wrk', 'node agent', 'executor', 'controller', 'control plane', 'rest'])}), 1 router ${fmt(rps('one'))} req/s (cores: ${cpu('one', ['router 1', 'pod', 'wrk', 'node agent', 'executor', 'controller', 'control plane', 'rest'])}); CPU µs per request: 1 router ${perRequest('one', { router: ['router 1'], pod: ['pod'], wrk: ['wrk'] })}; 2 routers ${perRequest('two', { routers: ['router 1', 'router 2'], pod: ['pod'], wrk: ['wrk'] })}; ${how}, rounds ${range(twoOne)}; ${failures('two') + failures('one')} non-2xx or socket errors`,
      '',
    ],
    [
      'scale-out: throughput via 1 router / straight to the pod',
      `${fmt(med(oneDirect), 2)}x`,
      `pod ${fmt(rps('direct'))} req/s (cores: ${cpu('direct', ['pod', 'wrk', 'node agent', 'control plane', 'rest'])}; CPU µs per request: ${perRequest('direct', { pod: ['pod'], wrk: ['wrk'] })}); rounds ${range(oneDirect)}; via 2 routers / pod ${fmt(med(twoDirect), 2)}x (${range(twoDirect)})`,
      '',
    ],
  ];
}

async function grantRoundTrips(split: SplitCluster, cluster: TestCluster, o: ScaleOutOptions): Promise<string[][]> {
  const [p1, p2] = split.routerUrls.map((u) => new Pool(u, { connections: 1 }));
  const names = Array.from({ length: o.functions }, (_, i) => `grant-${i}`);
  const firstEver = { uncached: [] as number[], cached: [] as number[] };
  const afterIdle = { uncached: [] as number[], cached: [] as number[] };
  try {
    // An instance of each, made through router 1 (the routers learn of a new function through their watch).
    for (const name of names) await createFunction(split.controller.controllerUrl, name);
    for (const name of names) await eventually(() => timedFirstCall(p1, name), `${name} through router 1`, 120_000, 200);
    await poolRefilled(cluster);
    await sleep(2000);
    for (let r = 0; r < o.grantRounds; r++) {
      // After GRANT_IDLE_MS without a call, and the router's 1 s sweep, every grant went back to the leader.
      if (r > 0) await sleep(GRANT_IDLE_MS + 2500);
      // Round 0: router 2, which never called these functions. Then the routers take turns.
      const router = r % 2 === 0 ? p2 : p1;
      const into = r === 0 ? firstEver : afterIdle;
      for (const name of names) {
        into.uncached.push(await timedFirstCall(router, name));
        into.cached.push(await timedFirstCall(router, name));
      }
    }
  } finally {
    await Promise.all([p1.close(), p2.close()]);
  }
  const u = percentiles(afterIdle.uncached);
  const c = percentiles(afterIdle.cached);
  const fu = percentiles(firstEver.uncached);
  const fc = percentiles(firstEver.cached);
  const ms = (us: number) => fmt(us / 1000, 2);
  return [
    [
      'scale-out: executor round trip (call without a grant - next call) p50',
      `${fmt(u.p50 - c.p50)} µs`,
      `without a grant p50 ${ms(u.p50)} ms, p99 ${ms(u.p99)} ms; cached p50 ${ms(c.p50)} ms, p99 ${ms(c.p99)} ms (${u.count} calls: ${o.functions} warm functions × ${o.grantRounds - 1} rounds, each after the router's grants went idle)`,
      '',
    ],
    [
      'scale-out: a router’s first call to a warm instance - next call p50',
      `${fmt(fu.p50 - fc.p50)} µs`,
      `first p50 ${ms(fu.p50)} ms, p99 ${ms(fu.p99)} ms; next p50 ${ms(fc.p50)} ms (router 2 after router 1 made the instances: the round trip and a new connection to the pod; ${fu.count} functions)`,
      '',
    ],
  ];
}

/** Until every router answers /hello: the function's route reached them, and an executor leads. */
async function helloThrough(routers: string[]): Promise<void> {
  for (const r of routers) await eventually(async () => ((await fetch(`${r}/hello`).then((x) => x.text())) === 'hello\n' ? true : undefined), `hello through ${r}`, 120_000, 200);
}

export async function scaleOutBench(o: ScaleOutOptions): Promise<string[][]> {
  const label = 'scale-out (kubernetes mode, roles apart)';
  if (!(await sandboxAvailable())) return [[label, 'skipped', 'bubblewrap is not usable here: the node agent runs function pods under it', '']];
  if (!fs.existsSync(kubeBinaryPath())) return [[label, 'skipped', `no Kubernetes binary at ${kubeBinaryPath()}: build it once with npm run kube:build (minutes; needs Go)`, '']];
  if (!(await hasWrk())) return [[label, 'skipped', 'wrk is not installed (apt-get install wrk)', '']];
  const rows: string[][] = [];
  const loadBefore = loadavg();
  const cluster = await startTestCluster();
  let split: SplitCluster | undefined;
  let all: TestServer | undefined;
  const startSplit = async () => {
    split = await startSplitCluster({ cluster, executors: 1, routers: 2 });
    const s = split;
    await eventually(() => s.leaderOf(), 'an executor leader', 30_000);
    return s;
  };
  // Cold starts: new functions' first calls, through router 1 of the split layout and through a role=all server
  // (router and executor in one process) on the same cluster and pool. Two executors would both manage the pool,
  // so one layout runs at a time, in the order split, role=all, split: drift in the machine's speed hits both alike.
  const coldSplit: number[] = [];
  const coldAll: number[] = [];
  let made = 0;
  const coldBlock = async (controllerUrl: string, routerUrl: string, into: number[], count: number) => {
    const router = new Pool(routerUrl, { connections: 1 });
    try {
      for (let i = 0; i < count; i++) into.push(await coldCall(cluster, controllerUrl, router, `cold-${made++}`));
    } finally {
      await router.close();
    }
  };
  try {
    let s = await startSplit();
    await deployHello(s.controller.controllerUrl, POOL);
    await helloThrough(s.routerUrls);
    rows.push(...(await throughput(s, cluster, o)));
    rows.push(...(await grantRoundTrips(s, cluster, o)));
    const firstHalf = Math.ceil(o.functions / 2);
    await coldBlock(s.controller.controllerUrl, s.routerUrls[0], coldSplit, firstHalf);
    const sets = s.sets();
    await s.stop();
    split = undefined;
    all = await startServer({ sets: [...sets, 'role=all'] });
    // Its executor adopts the pool's pods and hello's; its router learns the routes.
    await helloThrough([all.routerUrl]);
    await coldBlock(all.controllerUrl, all.routerUrl, coldAll, o.functions);
    await all.stop();
    all = undefined;
    s = await startSplit();
    await helloThrough(s.routerUrls);
    await coldBlock(s.controller.controllerUrl, s.routerUrls[0], coldSplit, o.functions - firstHalf);
    const cs = percentiles(coldSplit);
    const ca = percentiles(coldAll);
    rows.push([
      'scale-out: cold start from the warm pool, split roles - role=all p50',
      `${fmt((cs.p50 - ca.p50) / 1000, 1)} ms`,
      `split p50 ${fmt(cs.p50 / 1000, 1)} ms (p99 ${fmt(cs.p99 / 1000, 1)}), role=all p50 ${fmt(ca.p50 / 1000, 1)} ms (p99 ${fmt(ca.p99 / 1000, 1)}); ${o.functions} new functions each, in blocks split ${firstHalf}, role=all ${o.functions}, split ${o.functions - firstHalf}`,
      '',
    ]);
  } finally {
    await (split as SplitCluster | undefined)?.stop();
    await (all as TestServer | undefined)?.stop();
    await cluster.stop();
  }
  rows.push([`${label}: load average`, `${loadBefore} before`, `${loadavg()} after (1, 5, 15 min; ${os.cpus().length} cores)`, '']);
  return rows;
}

if (import.meta.main) {
  const { readKnobs } = await import('./knobs.ts');
  const knobs = readKnobs();
  const rows = await scaleOutBench({ seconds: knobs.seconds, rounds: knobs.rounds, functions: knobs.cold, grantRounds: knobs.grantRounds });
  console.log(['| benchmark | result | measured | target |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n'));
}
