// A paired A/B of the router: this tree's server (B) against another
// commit's (A), each with its own hello worker, loaded by a wrk each at the
// same time, so that both meet the same machine. On a machine whose speed
// changes from one second to the next (bench/RESULTS.md), taking the two in
// turn spreads a ratio by tens of percent; taken together, what differs is
// the code. Reported per round, then as medians: each router's CPU per
// request (the whole server process, and its user-space part) and req/s,
// B over A. The workers' CPU per request is the control: their code is the
// same on both sides unless the runtime changed.
//
//   node bench/router-ab.ts <commit> [--connections N] [--seconds S] [--rounds R] [--paced]
//
// The other commit is checked out into a temporary git worktree (removed at
// the end) and runs with this tree's node_modules. --paced gives each wrk
// the peers part's think time (0-20 ms between a connection's requests).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { descendants } from '../scripts/kube/process-tree.ts';
import type { StartOptions, TestServer } from '../test/helpers/server.ts';
import { deployHello, fmt, hasWrk, median, TICKS_PER_S, waitFor200, wrk } from './lib.ts';
import { paceScript, THINK_MS } from './peers.ts';
import { cpuTicks, userTicks } from './proc-cpu.ts';

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '..');

/** One side's figures in one round. */
export interface Side {
  rps: number;
  /** CPU per request, µs: the server process, its user-space part, its workers. */
  serverUs: number;
  serverUserUs: number;
  workersUs: number;
}

export interface Round {
  a: Side;
  b: Side;
}

/** B over A for each figure, per round, and the median and range over rounds. */
export function summarize(rounds: readonly Round[]): { name: string; ratios: number[]; median: number; min: number; max: number }[] {
  const figures: [string, (s: Side) => number][] = [
    ['router CPU per request', (s) => s.serverUs],
    ['router user-space CPU per request', (s) => s.serverUserUs],
    ["workers' CPU per request (control)", (s) => s.workersUs],
    ['req/s', (s) => s.rps],
  ];
  return figures.map(([name, of]) => {
    const ratios = rounds.map((r) => of(r.b) / of(r.a)).filter((x) => Number.isFinite(x));
    return { name, ratios, median: ratios.length === 0 ? Number.NaN : median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) };
  });
}

function positive(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a whole number above 0, not ${JSON.stringify(value)}`);
  return n;
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { connections: { type: 'string' }, seconds: { type: 'string' }, rounds: { type: 'string' }, paced: { type: 'boolean' } },
  });
  if (positionals.length !== 1) throw new Error('usage: node bench/router-ab.ts <commit> [--connections N] [--seconds S] [--rounds R] [--paced]');
  const connections = positive('connections', values.connections, 1);
  const seconds = positive('seconds', values.seconds, 3);
  const rounds = positive('rounds', values.rounds, 10);
  if (!(await hasWrk())) throw new Error('wrk is not installed (apt-get install wrk)');
  const sha = (await run('git', ['-C', REPO, 'rev-parse', '--verify', `${positionals[0]}^{commit}`]).catch(() => {
    throw new Error(`${JSON.stringify(positionals[0])} is not a commit of this repository`);
  })).stdout.trim();

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ab-'));
  const tree = path.join(dir, 'tree');
  const servers: TestServer[] = [];
  let cleaned: Promise<void> | undefined;
  const cleanUp = () => {
    cleaned ??= (async () => {
      for (const s of servers) await s.stop().catch((err) => console.error(`router-ab: stopping a server: ${(err as Error).message}`));
      await run('git', ['-C', REPO, 'worktree', 'remove', '--force', tree]).catch(() => {});
      fs.rmSync(dir, { recursive: true, force: true });
    })();
    return cleaned;
  };
  // Ctrl-C leaves neither servers nor a registered worktree behind.
  const interrupted = () => {
    void cleanUp().then(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  try {
    await run('git', ['-C', REPO, 'worktree', 'add', '--detach', tree, sha]);
    fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(tree, 'node_modules'));
    const sets = ['executor.sandbox=bubblewrap', 'logLevel=error'];
    type Start = (o: StartOptions) => Promise<TestServer>;
    const startA = ((await import(path.join(tree, 'test', 'helpers', 'server.ts'))) as { startServer: Start }).startServer;
    const startB = ((await import('../test/helpers/server.ts')) as { startServer: Start }).startServer;
    const a = await startA({ sets });
    servers.push(a);
    const b = await startB({ sets });
    servers.push(b);
    for (const s of [a, b]) {
      await deployHello(s.controllerUrl, 3);
      await waitFor200(`${s.routerUrl}/hello`);
    }
    const pace = path.join(dir, 'pace.lua');
    fs.writeFileSync(pace, paceScript(THINK_MS));
    const load = (s: TestServer, secs: number) => wrk(`${s.routerUrl}/hello`, { seconds: secs, connections, ...(values.paced ? { script: pace } : {}) });
    // Warm both paths (and V8's compiler) before anything is counted.
    await Promise.all([load(a, 3), load(b, 3)]);
    console.log(`A = ${sha.slice(0, 12)}, B = this tree; ${rounds} rounds of ${seconds} s, ${connections} connection(s) each${values.paced ? ', paced' : ''}, both at once`);
    const results: Round[] = [];
    for (let r = 0; r < rounds; r++) {
      const snap = (s: TestServer) => {
        const pid = s.child.pid as number;
        const workers = descendants(pid);
        return { pid, workers, all: cpuTicks(pid), user: userTicks(pid), w: cpuTicks(workers) };
      };
      const sa = snap(a);
      const sb = snap(b);
      const [ra, rb] = await Promise.all([load(a, seconds), load(b, seconds)]);
      // A side that fails fast would look cheap per request: any failure ends the comparison.
      for (const [name, res] of [['A', ra], ['B', rb]] as const) {
        if (res.non2xx > 0 || res.errors > 0) throw new Error(`round ${r + 1}: ${name} answered ${res.non2xx} non-2xx and had ${res.errors} socket errors`);
      }
      const side = (s: ReturnType<typeof snap>, res: { rps: number; requests: number }): Side => {
        const us = (ticks: number) => (ticks * 1e6) / TICKS_PER_S / res.requests;
        return { rps: res.rps, serverUs: us(cpuTicks(s.pid) - s.all), serverUserUs: us(userTicks(s.pid) - s.user), workersUs: us(cpuTicks(s.workers) - s.w) };
      };
      const round = { a: side(sa, ra), b: side(sb, rb) };
      results.push(round);
      const show = (x: Side) => `${fmt(x.rps)} req/s, router ${fmt(x.serverUs, 1)} µs (user ${fmt(x.serverUserUs, 1)}), workers ${fmt(x.workersUs, 1)} µs`;
      console.log(`round ${r + 1}: A ${show(round.a)} | B ${show(round.b)}`);
    }
    console.log('\n| B / A | median | min-max over rounds |\n|---|---|---|');
    for (const f of summarize(results)) {
      const over = f.ratios.length === rounds ? '' : ` (${f.ratios.length} of ${rounds} rounds: a process ended mid-round)`;
      console.log(f.ratios.length === 0 ? `| ${f.name} | n/a | no round measured it |` : `| ${f.name} | ${f.median.toFixed(3)}x | ${f.min.toFixed(2)}-${f.max.toFixed(2)}x${over} |`);
    }
  } finally {
    process.off('SIGINT', interrupted);
    await cleanUp();
  }
}

if (import.meta.main) {
  main().catch((err) => {
    console.error(`router-ab: ${(err as Error).message}`);
    process.exit(1);
  });
}
