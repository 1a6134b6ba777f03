// `npm run bench`: the run-functions benchmarks, each against a baseline
// measured in the same run.
//   1. router added latency: p50/p99 through the router vs calling the same
//      kind of worker directly over its Unix socket;
//   2. throughput through the router (wrk) as a ratio of a bare node:http server;
//   3. cold start from the warm pool (first call of a new function) as a
//      ratio of forking a fresh `node` that serves one request;
//   1b. a WebSocket message's round trip through the router's tunnel vs
//      straight to the same kind of worker;
//   3b. what a network namespace of its own costs a function with external
//      network: cold start and worker start, with vs without (bench/egress.ts);
//   4. authentication's added latency, and a scoped token's over an unscoped one (bench/auth.ts);
//   5. packages (bench/packages.ts) and Kafka triggers (bench/mq.ts);
//   6. goodput at 50/500/2,000 connections beside nginx, and tails while the
//      package is replaced every 2 s (bench/overload.ts);
//   6b. cold-start storms: 20 and 100 first calls at once, Node, Python and
//      Go, against as many concurrent forks of a plain program of the same
//      language (bench/storm.ts);
//   7. CLI start times against `node -e 0`, now and before issue 27 (bench/cli-start.ts);
//   8. router added latency with tracing off, on and before tracing, side by side (bench/tracing.ts).
//   9. kubernetes mode with its roles apart on the real control plane: two
//      routers against one, an executor round trip, cold starts split and
//      role=all (bench/scale-out.ts).
//  10. peers: Flint's router beside nginx, HAProxy and Go's ReverseProxy in
//      front of the same hello, against bare node:http (bench/peers.ts).
// Results print as a markdown table (and the peers' table after it);
// bench/RESULTS.md records them. The charts (bench/charts.ts) go to
// bench/charts/ for the parts that ran.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { startWorker } from '../src/executor/process/worker-process.ts';
import { clientFrame, OP, type RawPeer, rawUpgrade } from '../src/runtimes/node/ws-testing.ts';
import { eventually } from '../src/testing/eventually.ts';
import { startServer } from '../test/helpers/server.ts';
import { authBench } from './auth.ts';
import { type ColdStarts, writeCharts } from './charts.ts';
import { cliStartBench } from './cli-start.ts';
import { egressBench } from './egress.ts';
import { createFunction, createResource, deployHello, fmt, forkNodeOnce, hasWrk, interleavedLatency, percentiles, startBareServer, HELLO, timedFirstCall, waitFor200, type WrkResult, wrk } from './lib.ts';
import { readKnobs } from './knobs.ts';
import { kafkaBench } from './mq.ts';
import { overloadBench } from './overload.ts';
import { packagesBench } from './packages.ts';
import { peerRows, peersBench, peerTable } from './peers.ts';
import { scaleOutBench } from './scale-out.ts';
import type { PeersResult, StormResult } from './results.ts';
import { stormBench } from './storm.ts';
import { tracingBench } from './tracing.ts';

const WS_ECHO = 'module.exports = (ws) => ws.on("message", (m) => ws.send(m));';
const knobs = readKnobs();
const SECONDS = knobs.seconds;
const THROUGHPUT_ROUNDS = knobs.rounds;
const N = knobs.requests;
const sandbox = knobs.sandbox;


const rows: string[][] = [];
let coldStarts: ColdStarts | undefined;
let peers: PeersResult | undefined;
let storms: StormResult[] | undefined;
const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error'] });
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bench-'));
try {
  await deployHello(server.controllerUrl, 3);
  const routeUrl = `${server.routerUrl}/hello`;
  await waitFor200(routeUrl);

  // 1. Added latency: the same worker code, called directly vs through the router.
  const worker = await startWorker({ id: 'bench-direct', runtime: 'node', instanceDir: path.join(work, 'direct'), sandbox, allowNetwork: false, memoryMB: 256, onOutput() {} });
  fs.writeFileSync(path.join(worker.hostDirs.userfunc, 'deployarchive'), HELLO);
  await worker.specialize({ filepath: path.posix.join(worker.sandboxDirs.userfunc, 'deployarchive') }, 10_000);
  const direct = new Pool('http://localhost', { socketPath: worker.socketPath, connections: 1 });
  const viaRouter = new Pool(server.routerUrl, { connections: 1 });
  const call = (p: Pool, pathName: string) => async () => {
    const r = await p.request({ path: pathName, method: 'GET' });
    await r.body.text();
  };
  // Let the warm pool finish starting its workers (they would compete for the
  // CPU), and warm both paths' code before measuring.
  await new Promise((res) => setTimeout(res, 3000));
  for (let i = 0; i < 1000; i++) {
    await call(direct, '/')();
    await call(viaRouter, '/hello')();
  }
  const { a: d, b: r, rounds } = await interleavedLatency(call(direct, '/'), call(viaRouter, '/hello'), N);
  const how = `median of ${rounds} interleaved rounds`;
  rows.push(['router added latency p50', `${fmt(r.p50 - d.p50)} µs`, `direct ${fmt(d.p50)} µs, router ${fmt(r.p50)} µs (${how})`, '≤ 150 µs']);
  rows.push(['router added latency p99', `${fmt(r.p99 - d.p99)} µs`, `direct ${fmt(d.p99)} µs, router ${fmt(r.p99)} µs (${how})`, '']);
  await direct.close();
  await viaRouter.close();
  await worker.kill();

  // 1b. A WebSocket message's round trip: through the router's tunnel vs
  // straight to a worker of the same code, one connection each.
  {
    await createFunction(server.controllerUrl, 'wsecho', { code: WS_ECHO });
    await createResource(server.controllerUrl, 'httptriggers', { metadata: { name: 'wsecho' }, spec: { relativeurl: '/ws', functionref: { name: 'wsecho' } } });
    const wsWorker = await startWorker({ id: 'bench-ws-direct', runtime: 'node', instanceDir: path.join(work, 'ws-direct'), sandbox, allowNetwork: false, memoryMB: 256, onOutput() {} });
    fs.writeFileSync(path.join(wsWorker.hostDirs.userfunc, 'deployarchive'), WS_ECHO);
    await wsWorker.specialize({ filepath: path.posix.join(wsWorker.sandboxDirs.userfunc, 'deployarchive') }, 10_000);
    const open = async (peer: RawPeer, what: string) => {
      const { status } = await peer.head();
      if (status !== 101) throw new Error(`WebSocket ${what}: ${status}`);
      return peer;
    };
    const u = new URL(server.routerUrl);
    const directWs = await open(rawUpgrade(wsWorker.socketPath, { path: '/' }), 'direct');
    // The route reaches the router through the store's watch: it may take a moment.
    const routedWs = await eventually(() => open(rawUpgrade({ host: u.hostname, port: Number(u.port) }, { path: '/ws' }), 'via router'), 'the WebSocket route', 5000, 50);
    const frame = clientFrame(OP.TEXT, 'hello');
    const roundTrip = (peer: RawPeer) => async () => {
      peer.send(frame);
      await peer.frame();
    };
    for (let i = 0; i < 1000; i++) {
      await roundTrip(directWs)();
      await roundTrip(routedWs)();
    }
    const { a: wd, b: wr, rounds: wsRounds } = await interleavedLatency(roundTrip(directWs), roundTrip(routedWs), N);
    rows.push([
      'WebSocket round trip added by the router p50',
      `${fmt(wr.p50 - wd.p50)} µs`,
      `direct ${fmt(wd.p50)} µs, router ${fmt(wr.p50)} µs, p99 ${fmt(wd.p99)} / ${fmt(wr.p99)} µs (median of ${wsRounds} interleaved rounds)`,
      '',
    ]);
    directWs.socket.destroy();
    routedWs.socket.destroy();
    await wsWorker.kill();
  }

  // 2. Throughput against a bare node:http hello server, both under wrk, in
  // alternating rounds (the VM's speed drifts by tens of percent within a
  // minute); the figure is the round with the median ratio.
  if (await hasWrk()) {
    const bare = await startBareServer();
    // Both warmed under this load first: the router's first seconds under 32
    // connections run at about half its later rate (code paths the
    // one-connection latency runs never took).
    await wrk(bare.url, { seconds: 2, connections: 32 });
    await wrk(routeUrl, { seconds: 2, connections: 32 });
    const measure = (url: string) => wrk(url, { seconds: SECONDS, connections: 32 });
    const runs: { ratio: number; base: WrkResult; routed: WrkResult }[] = [];
    for (let i = 0; i < THROUGHPUT_ROUNDS; i++) {
      // Alternating which goes first, so neither always follows the other's load.
      let base: WrkResult;
      let routed: WrkResult;
      if (i % 2 === 0) {
        base = await measure(bare.url);
        routed = await measure(routeUrl);
      } else {
        routed = await measure(routeUrl);
        base = await measure(bare.url);
      }
      runs.push({ ratio: routed.rps / base.rps, base, routed });
    }
    await bare.stop();
    runs.sort((x, y) => x.ratio - y.ratio);
    const { ratio, base, routed } = runs[Math.floor(runs.length / 2)];
    const range = `${fmt(runs[0].ratio, 2)}-${fmt(runs[runs.length - 1].ratio, 2)}x over ${runs.length} rounds`;
    rows.push([
      'throughput via router / bare node:http',
      `${fmt(ratio, 2)}x`,
      `router ${fmt(routed.rps)} req/s (${routed.non2xx} non-2xx, ${routed.errors} errors), bare ${fmt(base.rps)} req/s (median round; ${range})`,
      '≥ 0.45x',
    ]);
  } else {
    rows.push(['throughput via router / bare node:http', 'skipped', 'wrk is not installed (apt-get install wrk)', '≥ 0.45x']);
  }

  // 3. Cold start from the warm pool vs forking a fresh node.
  const COLD = knobs.cold;
  const cold: number[] = [];
  const forks: number[] = [];
  const coldRouter = new Pool(server.routerUrl, { connections: 1 });
  try {
    for (let i = 0; i < COLD; i++) {
      const name = `cold-${i}`;
      await createFunction(server.controllerUrl, name);
      // Let the pool refill so each first call finds a warm worker (and no
      // worker is starting while either side is timed).
      await new Promise((res) => setTimeout(res, 600));
      // A fork next to each cold start, so drift in the VM's speed hits both alike.
      forks.push(await forkNodeOnce(work, `fork-${i}`));
      await new Promise((res) => setTimeout(res, 100));
      cold.push(await timedFirstCall(coldRouter, name));
    }
  } finally {
    await coldRouter.close();
  }
  coldStarts = { flintUs: cold, forkUs: forks };
  const c = percentiles(cold);
  const f = percentiles(forks);
  rows.push(['cold start from warm pool / fork node', `${fmt(c.p50 / f.p50, 2)}x`, `cold p50 ${fmt(c.p50 / 1000, 1)} ms (p99 ${fmt(c.p99 / 1000, 1)} ms), fork p50 ${fmt(f.p50 / 1000, 1)} ms`, '≤ 0.15x']);
} finally {
  await server.stop();
  fs.rmSync(work, { recursive: true, force: true });
}

// 3b. External network: a network namespace per instance (bench/egress.ts: a server of its own).
try {
  rows.push(...(await egressBench(sandbox, knobs.cold)));
} catch (err) {
  rows.push(['cold start from warm pool, external network / without', 'failed', String((err as Error).message), '']);
}

// 4. What authentication adds (bench/auth.ts: pairs of fresh servers of their own).
try {
  rows.push(...(await authBench(sandbox, N, knobs.authPairs)));
} catch (err) {
  rows.push(['auth added latency p50 (auth on - off)', 'failed', String((err as Error).message), '≤ 30 µs']);
}

if (knobs.packages) {
  const pkgWork = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bench-pkg-'));
  try {
    rows.push(...(await packagesBench(sandbox, pkgWork, knobs.cold)));
  } catch (err) {
    rows.push(['packages', 'failed', String((err as Error).message), '']);
  } finally {
    fs.rmSync(pkgWork, { recursive: true, force: true });
  }
}

if (knobs.kafka) {
  try {
    rows.push(...(await kafkaBench(sandbox, knobs.messages)));
  } catch (err) {
    rows.push(['Kafka trigger throughput / hand-written consumer', 'failed', String((err as Error).message), '≥ 0.7x']);
  }
}

if (knobs.overload) {
  try {
    rows.push(...(await overloadBench(sandbox, SECONDS)));
  } catch (err) {
    rows.push(['overload and updates', 'failed', String((err as Error).message), '']);
  }
}

if (knobs.storm) {
  try {
    const storm = await stormBench(sandbox, [20, 100], undefined, knobs.stormRounds);
    storms = storm.results;
    rows.push(...storm.rows);
  } catch (err) {
    rows.push(['cold-start storms', 'failed', String((err as Error).message), '≤ 1.0x']);
  }
}

if (knobs.cli) {
  try {
    rows.push(...(await cliStartBench(sandbox, knobs.cliRounds)));
  } catch (err) {
    rows.push(['CLI start / node -e 0', 'failed', String((err as Error).message), '≤ 0.25x of before']);
  }
}

if (knobs.tracing) {
  try {
    rows.push(...(await tracingBench(N)));
  } catch (err) {
    rows.push(['router added latency, tracing', 'failed', String((err as Error).message), '']);
  }
}

if (knobs.scaleOut) {
  try {
    rows.push(...(await scaleOutBench({ seconds: SECONDS, rounds: THROUGHPUT_ROUNDS, functions: knobs.cold, grantRounds: knobs.grantRounds })));
  } catch (err) {
    rows.push(['scale-out (kubernetes mode, roles apart)', 'failed', String((err as Error).message), '']);
  }
}

if (knobs.peers) {
  try {
    peers = await peersBench({ sandbox, seconds: SECONDS, rounds: THROUGHPUT_ROUNDS });
    rows.push(...peerRows(peers));
  } catch (err) {
    rows.push(['peers: throughput via router / bare node:http', 'failed', String((err as Error).message), '≥ 0.6x']);
  }
}

const lines = [
  `Run: ${new Date().toISOString()}, ${os.cpus().length} cores, Node ${process.version}, sandbox ${sandbox}`,
  '',
  '| benchmark | result | measured | target |',
  '|---|---|---|---|',
  ...rows.map((r) => `| ${r.join(' | ')} |`),
];
if (peers) lines.push('', peerTable(peers));
console.log(lines.join('\n'));
for (const file of await writeCharts({ peers, cold: coldStarts, storms })) console.log(`chart: ${path.relative(process.cwd(), file)}`);
