// Cold-start storms in kubernetes mode: N new functions' first calls at once,
// on a real control plane (scripts/kube, test/helpers/kube-cluster.ts) with
// the node agent as its one node, the pool growing ahead of first calls
// (executor.firstCallWindowSeconds=300) against not (0), in alternating
// order, each side on a cluster and a server of its own:
//
//   node bench/kube-storm.ts [--rounds R] [N ...]      (default: 2 rounds, N = 10 20)
//
// Each side: an environment of poolsize 3 whose pool is ready, N functions
// and routes created through the API, then (growth on) until the pool holds
// 3 + N ready pods, a 3 s settle, and N first calls at once through the
// router. Reported: each call's time from the burst's start (a failed
// call's too, counted apart), and the pool pods the node agent started from
// the burst on (the ReplicaSet's replacements for claimed pods, which
// compete with the burst for the CPU), told by their containers' first
// output: a pool pod's fetcher prints its address as it starts.
// The whole control plane (etcd, the API server, the controllers, every
// pod) shares this machine's cores with Flint, so the figures are this
// machine's, not a cluster's. Not part of `npm run bench`: the control
// plane's first build takes minutes and gigabytes (docs/kubernetes.md).
import os from 'node:os';
import { parseArgs } from 'node:util';
import { FUNCTION_NAMESPACE, startTestCluster } from '../test/helpers/kube-cluster.ts';
import { eventually, startServer } from '../test/helpers/server.ts';
import { createFunction, createResource, fmt, median, spread, spreadText } from './lib.ts';

const FETCHER = 'ghcr.io/flint/flint:test';
const POOL_SIZE = 3;
const SETTLE_MS = 3000;

export interface KubeStorm {
  n: number;
  /** executor.firstCallWindowSeconds: 300 grows the pool ahead, 0 does not. */
  windowSeconds: number;
  /** Each first call's time from the burst's start, ms, sorted. */
  callsMs: number[];
  failed: number;
  /** Pool pods whose containers first spoke after the burst began. */
  podsStartedDuringBurst: number;
  /** From the last function created until the pool held what the side waits for, ms. */
  poolReadyMs: number;
}

async function stormOnce(n: number, windowSeconds: number): Promise<KubeStorm> {
  // A pod's containers' first output line, by pod name: when the node agent started it.
  const firstSeen = new Map<string, number>();
  const cluster = await startTestCluster({
    log: (line) => {
      const pod = /^\[(poolmgr-[^/\]]+)\//.exec(line)?.[1];
      if (pod && !firstSeen.has(pod)) firstSeen.set(pod, performance.now());
    },
  });
  try {
    const server = await startServer({ sets: [...cluster.sets(FETCHER), 'logLevel=warn', `executor.firstCallWindowSeconds=${windowSeconds}`] });
    try {
      const kubectlJson = async (args: string[]) => JSON.parse(await cluster.controlPlane.kubectl([...args, '-o', 'json']));
      const readyPool = async () =>
        (await kubectlJson(['-n', FUNCTION_NAMESPACE, 'get', 'pods', '-l', 'executorType=poolmgr,managed=true'])).items.filter(
          (p: any) => !p.metadata.deletionTimestamp && p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'),
        ).length;
      await createResource(server.controllerUrl, 'environments', { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: POOL_SIZE } });
      await eventually(async () => (await readyPool()) === POOL_SIZE, `a ready pool of ${POOL_SIZE}`, 180_000);
      for (let i = 0; i < n; i++) {
        await createFunction(server.controllerUrl, `f${i}`);
        await createResource(server.controllerUrl, 'httptriggers', { metadata: { name: `f${i}` }, spec: { relativeurl: `/f${i}`, functionref: { name: `f${i}` } } });
      }
      const created = performance.now();
      const want = windowSeconds > 0 ? POOL_SIZE + n : POOL_SIZE;
      await eventually(async () => (await readyPool()) >= want, `a ready pool of ${want}`, 300_000);
      const poolReadyMs = performance.now() - created;
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      const start = performance.now();
      const calls = await Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const res = await fetch(`${server.routerUrl}/f${i}`).catch(() => undefined);
          await res?.text();
          return { ms: performance.now() - start, ok: res?.status === 200 };
        }),
      );
      // Replacements the ReplicaSet began during the burst speak within seconds.
      await new Promise((r) => setTimeout(r, 5000));
      return {
        n,
        windowSeconds,
        callsMs: calls.map((c) => c.ms).sort((a, b) => a - b),
        failed: calls.filter((c) => !c.ok).length,
        podsStartedDuringBurst: [...firstSeen.values()].filter((t) => t >= start).length,
        poolReadyMs,
      };
    } finally {
      await server.stop();
    }
  } finally {
    await cluster.stop();
  }
}

const p50 = (s: KubeStorm) => median(s.callsMs);
const range = (xs: number[], f: (n: number) => string) => spreadText(spread(xs), f);

/** The table: per N and side, medians over rounds with min-max; on over off per round. */
export function kubeStormTable(storms: KubeStorm[]): string {
  const lines = [
    '| N | pool growth ahead | first calls p50, ms | slowest call, ms | pool pods started during the burst | pool ready after the last create, ms | failed |',
    '|---|---|---|---|---|---|---|',
  ];
  const ns = [...new Set(storms.map((s) => s.n))].sort((a, b) => a - b);
  for (const n of ns) {
    for (const windowSeconds of [300, 0]) {
      const side = storms.filter((s) => s.n === n && (s.windowSeconds > 0) === (windowSeconds > 0));
      if (side.length === 0) continue;
      const ms = (x: number) => fmt(x);
      lines.push(
        `| ${n} | ${windowSeconds > 0 ? 'on' : 'off'} | ${range(side.map(p50), ms)} | ${range(side.map((s) => s.callsMs[s.callsMs.length - 1]), ms)} | ${range(side.map((s) => s.podsStartedDuringBurst), ms)} | ${range(side.map((s) => s.poolReadyMs), ms)} | ${side.reduce((a, s) => a + s.failed, 0)} |`,
    );
    }
    const on = storms.filter((s) => s.n === n && s.windowSeconds > 0);
    const off = storms.filter((s) => s.n === n && s.windowSeconds === 0);
    const pairs = Math.min(on.length, off.length);
    if (pairs > 0) {
      const ratios = Array.from({ length: pairs }, (_, i) => p50(on[i]) / p50(off[i]));
      lines.push(`| ${n} | on / off, p50, round by round | ${range(ratios, (x) => `${fmt(x, 2)}x`)} | | | | |`);
    }
  }
  return lines.join('\n');
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { rounds: { type: 'string' } } });
  const rounds = Number(values.rounds ?? 2);
  const sizes = positionals.length > 0 ? positionals.map(Number) : [10, 20];
  if (!Number.isInteger(rounds) || rounds < 1 || sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 100)) {
    throw new Error('usage: node bench/kube-storm.ts [--rounds R] [N ...] (R ≥ 1, each N from 1 to 100)');
  }
  const storms: KubeStorm[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const n of sizes) {
      // Alternating which side goes first, so that neither always meets the machine first.
      const sides = round % 2 === 0 ? [300, 0] : [0, 300];
      for (const windowSeconds of sides) {
        const s = await stormOnce(n, windowSeconds);
        console.error(`round ${round + 1}, N=${n}, growth ${windowSeconds > 0 ? 'on' : 'off'}: p50 ${fmt(p50(s))} ms, slowest ${fmt(s.callsMs[s.callsMs.length - 1])} ms, pods started during the burst ${s.podsStartedDuringBurst}, failed ${s.failed}`);
        storms.push(s);
      }
    }
  }
  console.log(`Run: ${new Date().toISOString()}, ${os.cpus().length} cores, Node ${process.version}; ${rounds} round(s); kubernetes mode on the development control plane, poolsize ${POOL_SIZE}\n`);
  console.log(kubeStormTable(storms));
}
