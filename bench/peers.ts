// Flint's router beside the proxies a user could put in front of the same
// Node hello function instead, all against bare node:http in the same round:
//   - bare node:http: the hello server (lib's startBareServer) on a loopback
//     TCP port, called straight: the baseline, and the upstream of every peer;
//   - Flint: a server of its own, route /hello to the hello function (its
//     worker under the bench's sandbox, on a Unix socket);
//   - Flint again, its server on the first CPU and its workers on the others
//     (install values router.cpus and executor.workerCpus);
//   - nginx and HAProxy (Debian), one worker each, keep-alive upstream;
//   - Go's httputil.ReverseProxy (bench/peers/goproxy, GOMAXPROCS=1), which
//     Fission's router is built on;
//   - Knative's queue-proxy, when it builds from the module proxy as released;
//   - a Node socket pipe (bench/peers/node-pipe): each client connection piped
//     to an upstream connection of its own, no HTTP parsed. Not a proxy one
//     could deploy, but the floor under any written in Node: the gap between
//     it and Flint is the router's own work, the rest is Node's;
//   - bare node:http again, the same server in a slot of its own (an A/A
//     comparison): what this machine's own noise makes of a ratio and an added
//     latency when nothing stands between, so a peer's spread can be read
//     against it.
// wrk (1 thread, 32 connections) runs against each in turn, in rounds whose
// order rotates, twice: at full load (as fast as each answers: throughput,
// and latency that is mostly queueing, 32 / req/s by Little's law) and paced
// (each connection waits 0-2 x THINK_MS at random between requests, a rate
// every peer carries, so latency is the path's own; a fixed wait keeps the
// 32 connections in step, and each burst of 32 queues behind itself). Each peer's throughput ratio and
// added p50/p99 are taken within a round; the tables give their median and
// min-max over rounds.
// `node bench/peers.ts` runs this part alone (and writes its charts).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { findGo } from '../src/runtimes/go/launch.ts';
import { usableCpus } from '../src/sandbox/cpu-affinity.ts';
import { startServer } from '../test/helpers/server.ts';
import { writeCharts } from './charts.ts';
import { readKnobs } from './knobs.ts';
import { deployHello, fmt, hasWrk, spread, spreadText, startBareServer, type WrkResult, waitFor200, wrk } from './lib.ts';
import { buildQueueProxy, findProgram, type RunningProxy, startGoProxy, startHaproxy, startNginx, startNodePipe } from './proxies.ts';
import type { PeerSummary, PeersResult } from './results.ts';

const execFileP = promisify(execFile);

export const BARE = 'bare node:http';
export const FLINT = 'Flint router';
export const NODE_PIPE = 'Node socket pipe (floor, no HTTP)';
/** The baseline measured again as if it were a peer: the spread the machine alone gives the figures. */
export const BARE_AGAIN = 'A/A: bare node:http again';
/** The router on a core of its own and its workers on the others (install values router.cpus, executor.workerCpus). */
export const FLINT_OWN_CORE = 'Flint router, a core of its own';
/** Idle keep-alive connections each proxy keeps to the upstream (more than wrk's 32). */
const KEEPALIVE = 64;
/** The paced runs' mean wait between a connection's requests: 32 connections then offer at most 3,200 req/s. */
export const THINK_MS = 10;
export const TARGET_RATIO = 0.6;
export const TARGET_ADDED_P99_US = 200;

/** Round `round`'s order: `names` rotated by the round's number. */
export function rotation<T>(names: T[], round: number): T[] {
  const k = round % names.length;
  return [...names.slice(k), ...names.slice(0, k)];
}

/** Per-peer figures from rounds of wrk results by name, each taken against `baseline` of the same round. */
export function summarizePeers(rounds: Record<string, WrkResult>[], baseline: string = BARE): PeerSummary[] {
  if (rounds.length === 0) return [];
  const names = Object.keys(rounds[0]);
  if (!names.includes(baseline)) throw new Error(`no ${baseline} in the rounds`);
  const ordered = [baseline, ...names.filter((n) => n !== baseline)];
  return ordered.map((name) => {
    const of = (f: (r: Record<string, WrkResult>) => number) => rounds.map(f);
    const ratio = of((r) => r[name].rps / r[baseline].rps);
    const addedP50 = of((r) => r[name].p50Us - r[baseline].p50Us);
    const addedP99 = of((r) => r[name].p99Us - r[baseline].p99Us);
    return {
      name,
      rps: spread(of((r) => r[name].rps)),
      ratio: spread(ratio),
      p50: spread(of((r) => r[name].p50Us)),
      p99: spread(of((r) => r[name].p99Us)),
      addedP50: spread(addedP50),
      addedP99: spread(addedP99),
      perRound: { ratio, addedP50, addedP99, rps: of((r) => r[name].rps) },
      non2xx: of((r) => r[name].non2xx).reduce((a, b) => a + b, 0),
      errors: of((r) => r[name].errors).reduce((a, b) => a + b, 0),
      ...(rounds.every((r) => r[name].stealPct !== undefined) ? { steal: of((r) => r[name].stealPct as number) } : {}),
    };
  });
}

const signed = (n: number) => (n > 0 ? `+${fmt(n)}` : fmt(n));
const range = spreadText;

function tableLines(summaries: PeerSummary[], baseline: string, withRatio: boolean): string[] {
  const lines = [
    `| peer | req/s |${withRatio ? ' / bare node |' : ''} p50 | added p50 | p99 | added p99 | non-2xx, socket errors |`,
    `|---|---|${withRatio ? '---|' : ''}---|---|---|---|---|`,
  ];
  for (const s of summaries) {
    const base = s.name === baseline;
    const ratio = withRatio ? ` ${base ? '1x' : range(s.ratio, (n) => `${fmt(n, 2)}x`)} |` : '';
    lines.push(
      `| ${s.name} | ${range(s.rps, (n) => fmt(n))} |${ratio} ${range(s.p50, (n) => fmt(n))} | ${base ? '' : range(s.addedP50, signed, ' to ')} | ${range(s.p99, (n) => fmt(n))} | ${base ? '' : range(s.addedP99, signed, ' to ')} | ${s.non2xx}, ${s.errors} |`,
    );
  }
  return lines;
}

/** Every run's steal reading, all peers and rounds; empty when none was measured. */
function stealsOf(summaries: PeerSummary[]): number[] {
  return summaries.flatMap((s) => s.steal ?? []);
}

/**
 * What the hypervisor took during the runs (steal), and the baseline's rate beside it round by round: whether a
 * spread over rounds follows the steal or comes with none (bench/RESULTS.md has runs of each), beside the A/A row.
 */
function stealLine(summaries: PeerSummary[], baseline: string): string | undefined {
  const all = stealsOf(summaries);
  const base = summaries.find((s) => s.name === baseline);
  if (all.length === 0 || !base?.steal) return undefined;
  const pct = (n: number) => `${fmt(n, n < 10 ? 1 : 0)}%`;
  const rounds = base.steal.map((st, i) => `${fmt(base.perRound.rps[i])} req/s at ${pct(st)}`).join(', ');
  return `Steal (CPU time the hypervisor gave others while this VM's cores were ready to run, /proc/stat) during these runs: ${range(spread(all), pct)} of the machine's CPU time. ${baseline} by round: ${rounds}.`;
}

/** The peer tables, full load and paced: markdown, medians with min-max over the rounds. */
export function peerTable(r: PeersResult): string {
  const lines = [
    `Peers: wrk 1 thread, ${r.connections} connections, ${r.seconds} s per run, ${r.rounds} rounds in a rotating order; median (min-max over rounds), latencies in µs, added = the peer's minus bare node's in the same round.`,
    '',
    'Full load (each connection sends its next request as soon as the answer is in):',
    '',
    ...tableLines(r.summaries, r.baseline, true),
  ];
  for (const s of r.skipped) lines.push(`| ${s.name} | ${s.reason} | | | | | | |`);
  const steal = (summaries: PeerSummary[]) => {
    const line = stealLine(summaries, r.baseline);
    return line ? ['', line] : [];
  };
  lines.push(...steal(r.summaries));
  if (r.paced.length > 0) lines.push('', `Paced (each connection waits 0-${2 * r.thinkMs} ms at random between requests, ${r.thinkMs} ms on average):`, '', ...tableLines(r.paced, r.baseline, false), ...steal(r.paced));
  return lines.join('\n');
}

/** Rows for the benchmark's main table: the router's figures against the issue's targets. */
export function peerRows(r: PeersResult): string[][] {
  const flint = r.summaries.find((s) => s.name === FLINT);
  if (!flint) return [['peers: throughput via router / bare node:http', 'failed', 'no Flint figures', `≥ ${TARGET_RATIO}x`]];
  const others = r.summaries
    .filter((s) => s.name !== FLINT && s.name !== BARE && s.name !== BARE_AGAIN)
    .map((s) => `${s.name} ${fmt(s.ratio.median, 2)}x`)
    .join(', ');
  const over = `over ${r.rounds} rounds at ${r.connections} connections`;
  const paced = r.paced.find((s) => s.name === FLINT);
  const aa = r.summaries.find((s) => s.name === BARE_AGAIN);
  const aaPaced = r.paced.find((s) => s.name === BARE_AGAIN);
  const rows = [
    [
      'peers: throughput via router / bare node:http',
      `${fmt(flint.ratio.median, 2)}x`,
      `${fmt(flint.ratio.min, 2)}-${fmt(flint.ratio.max, 2)}x ${over}${others ? `; ${others}` : ''}${aa ? `; bare node:http against itself (A/A) ${range(aa.ratio, (n) => `${fmt(n, 2)}x`)}` : ''}${stealRange(r.summaries)}`,
      `≥ ${TARGET_RATIO}x`,
    ],
  ];
  if (paced) {
    rows.push([
      `peers: router added p99 over bare node:http, paced (${r.thinkMs} ms on average between a connection's requests)`,
      `${signed(paced.addedP99.median)} µs`,
      `${signed(paced.addedP99.min)} to ${signed(paced.addedP99.max)} µs ${over}; added p50 ${range(paced.addedP50, signed, ' to ')} µs; at full load added p99 ${range(flint.addedP99, signed, ' to ')} µs, p50 ${range(flint.addedP50, signed, ' to ')} µs${aaPaced ? `; paced, bare node:http against itself (A/A) added p99 ${range(aaPaced.addedP99, signed, ' to ')} µs` : ''}`,
      `≤ ${TARGET_ADDED_P99_US} µs`,
    ]);
  }
  return rows;
}

/** The hypervisor's steal over all full-load runs, as a clause for the main table; empty when not measured. */
function stealRange(summaries: PeerSummary[]): string {
  const all = stealsOf(summaries);
  return all.length === 0 ? '' : `; the hypervisor's steal during the runs ${fmt(Math.min(...all), 1)}-${fmt(Math.max(...all), 1)}% of the machine's CPU time`;
}

/** A wrk script waiting 0 to 2 x `meanMs` (whole ms, uniform) before each request of a connection. */
export function paceScript(meanMs: number): string {
  return `math.randomseed(os.time())\nfunction delay()\n  return math.random(0, ${2 * meanMs})\nend\n`;
}

async function version(command: string, args: string[], pattern: RegExp): Promise<string> {
  const out = await execFileP(command, args).catch((e: { stdout?: string; stderr?: string }) => e);
  const m = pattern.exec(`${out.stdout ?? ''}${out.stderr ?? ''}`);
  return m ? ` ${m[1]}` : '';
}

export async function peersBench(o: { sandbox: string; seconds: number; rounds: number; connections?: number }): Promise<PeersResult> {
  const connections = o.connections ?? 32;
  const result: PeersResult = {
    baseline: BARE,
    targets: { ratio: TARGET_RATIO, addedP99Us: TARGET_ADDED_P99_US },
    connections,
    seconds: o.seconds,
    rounds: o.rounds,
    summaries: [],
    paced: [],
    thinkMs: THINK_MS,
    skipped: [],
  };
  if (!(await hasWrk())) {
    result.skipped.push({ name: 'all peers', reason: 'skipped: wrk is not installed (apt-get install wrk)' });
    return result;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bench-peers-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const bare = await startBareServer();
    stops.push(() => bare.stop());
    const server = await startServer({ sets: [`executor.sandbox=${o.sandbox}`, 'logLevel=error'] });
    stops.push(() => server.stop());
    await deployHello(server.controllerUrl, 3);
    const targets: { name: string; url: string }[] = [
      { name: BARE, url: bare.url },
      { name: FLINT, url: `${server.routerUrl}/hello` },
    ];
    await waitFor200(`${server.routerUrl}/hello`);
    // What the CPU placement values trade (docs/cpu-placement.md), here where wrk shares the cores.
    const cpus = usableCpus();
    if (cpus.length >= 2) {
      const sets = [`executor.sandbox=${o.sandbox}`, 'logLevel=error', `router.cpus=${cpus[0]}`, `executor.workerCpus=${cpus.slice(1).join(',')}`];
      const placed = await startServer({ sets });
      stops.push(() => placed.stop());
      await deployHello(placed.controllerUrl, 3);
      targets.push({ name: FLINT_OWN_CORE, url: `${placed.routerUrl}/hello` });
      await waitFor200(`${placed.routerUrl}/hello`);
    } else result.skipped.push({ name: FLINT_OWN_CORE, reason: 'skipped: this process may use one CPU only' });

    const upstream = { upstreamPort: bare.port, keepalive: KEEPALIVE };
    const peer = async (name: string, start: () => Promise<RunningProxy | string>) => {
      try {
        const p = await start();
        if (typeof p === 'string') {
          result.skipped.push({ name, reason: p });
          return;
        }
        stops.push(() => p.stop());
        targets.push({ name, url: p.url });
      } catch (err) {
        result.skipped.push({ name, reason: `failed: ${(err as Error).message}` });
      }
    };
    const nginx = findProgram('nginx');
    const nginxName = `nginx${nginx ? await version(nginx, ['-v'], /nginx\/(\S+)/) : ''}`;
    await peer(nginxName, async () => {
      if (!nginx) return 'skipped: nginx is not installed (apt-get install nginx)';
      fs.mkdirSync(path.join(dir, 'nginx'));
      return startNginx(nginx, { dir: path.join(dir, 'nginx'), ...upstream });
    });
    const haproxy = findProgram('haproxy');
    const haproxyName = `HAProxy${haproxy ? await version(haproxy, ['-v'], /version (\d+\.\d+\.\d+)/) : ''}`;
    await peer(haproxyName, async () => {
      if (!haproxy) return 'skipped: HAProxy is not installed (apt-get install haproxy)';
      fs.mkdirSync(path.join(dir, 'haproxy'));
      return startHaproxy(haproxy, { dir: path.join(dir, 'haproxy'), ...upstream });
    });
    const go = findGo();
    const goName = `Go ReverseProxy${go ? await version(go, ['version'], /go(\d+\.\d+(?:\.\d+)?)/) : ''}`;
    await peer(goName, async () => (go ? startGoProxy(go, upstream) : 'skipped: no Go toolchain on PATH or in /usr/local/go'));
    await peer('Knative queue-proxy', async () => {
      if (!go) return 'skipped: no Go toolchain on PATH or in /usr/local/go';
      const built = await buildQueueProxy(go);
      if ('reason' in built) return `not built: ${built.reason}`;
      return `built (${built.bin}) but not run: the bench does not start it yet (it needs a Knative revision's SERVING_* environment)`;
    });
    await peer(NODE_PIPE, () => startNodePipe(upstream));
    // Last, so that the others keep their places in the rotation (the router next to bare node:http in most rounds),
    // and the A/A slot is as far from the baseline's as a peer's can be in some rounds.
    targets.push({ name: BARE_AGAIN, url: bare.url });

    // The worker's warm pool settles, then every path warms under the load
    // (a proxy's first seconds under 32 connections are not its rate).
    await new Promise((r) => setTimeout(r, 3000));
    for (const t of targets) await wrk(t.url, { seconds: 2, connections });
    const pace = path.join(dir, 'pace.lua');
    fs.writeFileSync(pace, paceScript(THINK_MS));
    const full: Record<string, WrkResult>[] = [];
    const paced: Record<string, WrkResult>[] = [];
    for (let i = 0; i < o.rounds; i++) {
      full.push({});
      paced.push({});
      for (const t of rotation(targets, i)) {
        full[i][t.name] = await wrk(t.url, { seconds: o.seconds, connections });
        paced[i][t.name] = await wrk(t.url, { seconds: o.seconds, connections, script: pace });
      }
    }
    result.summaries = summarizePeers(full);
    result.paced = summarizePeers(paced);
    return result;
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const knobs = readKnobs();
  const r = await peersBench({ sandbox: knobs.sandbox, seconds: knobs.seconds, rounds: knobs.rounds });
  console.log(`Run: ${new Date().toISOString()}, ${os.cpus().length} cores, Node ${process.version}, sandbox ${knobs.sandbox}\n`);
  console.log(peerTable(r));
  console.log(['', '| benchmark | result | measured | target |', '|---|---|---|---|', ...peerRows(r).map((row) => `| ${row.join(' | ')} |`)].join('\n'));
  for (const f of await writeCharts({ peers: r })) console.log(`wrote ${f}`);
}
