// Cold-start storms: the first calls of N different functions at once, as a
// ratio of N concurrent forks of a plain runtime process that each serve one
// request (what a user's own "start a process per function" would cost on the
// same machine, in the same run). A single cold start from the warm pool is
// cheap (bench/run.ts); a burst of them is what finds an empty pool.
//
// Run alone: `node bench/storm.ts [N ...]` (default 20 100).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { startServer, type TestServer } from '../test/helpers/server.ts';
import { readKnobs } from './knobs.ts';
import { createFunction, createResource, fmt, forkNodeOnce, forkPythonOnce, machineCpuDuring, percentiles, timedFirstCall } from './lib.ts';
import type { StormResult } from './results.ts';

export interface StormRuntime {
  name: 'node' | 'python';
  image: string;
  code: string;
  /** One fork until it has served a request, timed from `since`, the burst's start. */
  fork(dir: string, i: number, since: bigint): Promise<number>;
}

const NODE: StormRuntime = {
  name: 'node',
  image: 'flint/node-env',
  code: 'module.exports = async () => ({ status: 200, body: "hello\\n" });',
  fork: (dir, i, since) => forkNodeOnce(dir, `storm-node-${i}`, since),
};

const PYTHON: StormRuntime = {
  name: 'python',
  image: 'flint/python-env',
  code: 'def main():\n    return "hello"\n',
  fork: (dir, i, since) => forkPythonOnce(dir, `storm-py-${i}`, since),
};

export const STORM_RUNTIMES = { node: NODE, python: PYTHON };

async function settle(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
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

async function deploy(server: TestServer, rt: StormRuntime, env: string, names: string[]): Promise<void> {
  for (const name of names) await createFunction(server.controllerUrl, name, { env, code: rt.code });
}

/**
 * N functions of `rt`'s environment (fresh, pool of its default size), then
 * all N first calls at once; then N more functions and their first calls at
 * once, while the pool still remembers the first burst; and N forks at once
 * (before the bursts in odd rounds, after them in even ones).
 */
export async function storm(server: TestServer, rt: StormRuntime, n: number, round: number, work: string): Promise<Omit<StormResult, 'round'>[]> {
  const env = `storm-${rt.name}-${n}-${round}`;
  await createResource(server.controllerUrl, 'environments', { metadata: { name: env }, spec: { runtime: { image: rt.image } } });
  const first = Array.from({ length: n }, (_, i) => `${env}-a${i}`);
  const next = Array.from({ length: n }, (_, i) => `${env}-b${i}`);
  await deploy(server, rt, env, first);
  // The pool fills and the deployments unpack before anyone is timed.
  await settle(3000);
  let cpuMsPerFork = Number.NaN;
  const forkAll = async () => {
    const { result, cpuMs } = await machineCpuDuring(() => {
      const since = process.hrtime.bigint();
      return Promise.all(first.map((_, i) => rt.fork(work, round * 1000 + i, since)));
    });
    cpuMsPerFork = cpuMs / n;
    return result;
  };
  let forks: number[] = [];
  if (round % 2 === 1) {
    forks = await forkAll();
    await settle(1500);
  }
  const a = await burst(server, first);
  await deploy(server, rt, env, next);
  // The grown pool refills (in the background, at the lower priority) before the next burst.
  await settle(Number(process.env.STORM_REFILL_MS ?? 10_000));
  const b = await burst(server, next);
  if (round % 2 === 0) {
    await settle(3000);
    forks = await forkAll();
  }
  return [
    { runtime: rt.name, n, burst: 'first', forks, cpuMsPerFork, ...a },
    { runtime: rt.name, n, burst: 'next', forks, cpuMsPerFork, ...b },
  ];
}

/** A storm's p50 over its forks' p50. */
export const stormRatio = (r: StormResult) => (r.calls.length > 0 ? percentiles(r.calls).p50 / percentiles(r.forks).p50 : Number.NaN);

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
    const ratios = measured.map(stormRatio);
    const which = burst === 'first' ? "a new environment's first burst" : 'the next burst (pool grown)';
    const spreadText = ratios.length > 1 ? ` (${fmt(Math.min(...ratios), 2)}-${fmt(Math.max(...ratios), 2)}x over ${ratios.length} rounds)` : '';
    const firstError = rounds.find((r) => r.firstError)?.firstError;
    return [
      `cold-start storm, ${n} ${runtime} functions at once, ${which} / ${n} concurrent ${runtime === 'node' ? 'node' : 'python3'} forks`,
      failed > 0 ? `${failed} failed` : `${fmt(stormRatio(mid), 2)}x${spreadText}`,
      `median round: storm p50 ${fmt(c.p50 / 1000, 0)} ms, p99 ${fmt(c.p99 / 1000, 0)} ms; forks p50 ${fmt(f.p50 / 1000, 0)} ms, p99 ${fmt(f.p99 / 1000, 0)} ms; machine CPU per call ${fmt(mid.cpuMsPerCall, 0)} ms, per fork ${fmt(mid.cpuMsPerFork, 0)} ms${firstError ? `; first error: ${firstError}` : ''}`,
      '≤ 1.0x',
    ];
  });
}

/**
 * Storms of each size for each runtime, each on a server of its own: instances an earlier storm left (up to twice
 * its size, idle but not yet reaped) would otherwise hold the instance budget the next one starts from.
 */
export async function stormBench(sandbox: 'bubblewrap' | 'none', sizes: number[], runtimes: StormRuntime[] = [NODE, PYTHON], rounds = 1): Promise<{ rows: string[][]; results: StormResult[] }> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-storm-'));
  const results: StormResult[] = [];
  try {
    let seq = 0;
    for (let round = 0; round < rounds; round++) {
      for (const rt of runtimes) {
        for (const n of sizes) {
          // Workers get 128 MiB each so that the largest storm fits the derived instance budget of a small machine.
          const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error', 'executor.memoryMB=128'] });
          try {
            for (const r of await storm(server, rt, n, seq++, work)) results.push({ ...r, round });
          } finally {
            await server.stop();
          }
        }
      }
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return { rows: stormRows(results), results };
}

if (import.meta.main) {
  const sizes = process.argv.slice(2).map(Number);
  const which = process.env.STORM_RUNTIMES?.split(',').map((r) => STORM_RUNTIMES[r as keyof typeof STORM_RUNTIMES]);
  const knobs = readKnobs();
  const { rows, results } = await stormBench(knobs.sandbox, sizes.length > 0 ? sizes : [20, 100], which, knobs.stormRounds);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  const { writeCharts } = await import('./charts.ts');
  for (const file of await writeCharts({ storms: results })) console.log(`chart: ${path.relative(process.cwd(), file)}`);
}
