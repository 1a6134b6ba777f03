// Overload and change, against baselines measured in the same run:
//   - goodput (2xx per second) at 50, 500 and 2,000 connections against a
//     function that takes 5 ms, beside nginx (one worker, keep-alive
//     upstream) in front of a plain Node server of the same 5 ms;
//   - throughput and p99 latency while the function's package is replaced
//     every 2 s, against the same load without updates, in alternating rounds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer } from '../test/helpers/server.ts';
import { createFunction, createResource, fmt, hasWrk, median, startBareServer, wrk, type WrkResult } from './lib.ts';
import { findProgram, type RunningProxy, startNginx } from './proxies.ts';

const SLOW = 'module.exports = async () => { await new Promise((r) => setTimeout(r, 5)); return { status: 200, body: "ok\\n" }; };';
const CONNECTIONS = [50, 500, 2000];

/** A plain Node server answering after 5 ms, and nginx in front of it; the peer a user would put up instead. */
async function startNginxPeer(dir: string, nginx: string): Promise<RunningProxy> {
  const node = await startBareServer({ delayMs: 5, body: 'ok\n' });
  try {
    const proxy = await startNginx(nginx, { dir, upstreamPort: node.port, keepalive: 256 });
    return {
      url: proxy.url,
      async stop() {
        await proxy.stop();
        await node.stop();
      },
    };
  } catch (err) {
    await node.stop();
    throw err;
  }
}

const share = (r: WrkResult) => `${fmt(r.goodput)} 2xx/s, ${r.non2xx} non-2xx, ${r.errors} socket errors/timeouts, p99 ${fmt(r.p99Us / 1000, 1)} ms`;

export async function overloadBench(sandbox: string, seconds: number): Promise<string[][]> {
  const rows: string[][] = [];
  if (!(await hasWrk())) return [['overload goodput', 'skipped', 'wrk is not installed', '']];
  const nginx = findProgram('nginx');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bench-overload-'));
  const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error'] });
  try {
    await createResource(server.controllerUrl, 'environments', { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 3 } });
    await createFunction(server.controllerUrl, 'slow', { code: SLOW });
    const flintUrl = `${server.routerUrl}/flint-function/slow`;
    await wrk(flintUrl, { seconds: 2, connections: 50 });

    // Goodput under rising load, each step beside nginx's in the same minute.
    if (nginx) {
      const peer = await startNginxPeer(dir, nginx);
      try {
        await wrk(peer.url, { seconds: 2, connections: 50 });
        // Each step twice: the arrival (2,000 new connections at once, and a scale-out to a second instance at 2,000
        // with requestsPerPod 1000), where timeouts and errors are counted, then the steady state, whose goodput the
        // target compares: capacity under so many connections, not the cost of opening them.
        const byConns: Record<number, { arrival: WrkResult; steady: WrkResult }> = {};
        for (const c of CONNECTIONS) {
          const opts = { seconds, connections: c, threads: 2, timeoutSeconds: 2 };
          const arrivalNginx = await wrk(peer.url, { ...opts, seconds: 2 });
          const arrival = await wrk(flintUrl, { ...opts, seconds: 2 });
          const viaNginx = await wrk(peer.url, opts);
          const viaFlint = await wrk(flintUrl, opts);
          byConns[c] = { arrival, steady: viaFlint };
          rows.push([`goodput at ${c} connections, Flint / nginx`, `${fmt(viaFlint.goodput / viaNginx.goodput, 2)}x`, `Flint ${share(viaFlint)}; nginx ${share(viaNginx)}`, '']);
          rows.push([`arrival of ${c} connections at once (first 2 s), Flint / nginx`, `${fmt(arrival.goodput / arrivalNginx.goodput, 2)}x`, `Flint ${share(arrival)}; nginx ${share(arrivalNginx)}`, 'no timeouts']);
        }
        const a = byConns[2000].arrival;
        rows.push([
          'goodput at 2,000 / at 500 connections (Flint)',
          `${fmt(byConns[2000].steady.goodput / byConns[500].steady.goodput, 2)}x`,
          `arrival: ${fmt(a.goodput / byConns[500].arrival.goodput, 2)}x; at 2,000: ${byConns[2000].steady.non2xx + a.non2xx} non-2xx, ${byConns[2000].steady.errors + a.errors} socket errors/timeouts (arrival and steady)`,
          '≥ 0.8x, no timeouts',
        ]);
      } finally {
        await peer.stop();
      }
    } else {
      rows.push(['goodput vs nginx', 'skipped', 'nginx is not installed (apt-get install nginx)', '']);
    }

    // Tails during change: the package replaced every 2 s under 32 connections.
    const pkgUrl = `${server.controllerUrl}/v1/namespaces/default/packages/slow-pkg`;
    let version = 0;
    const replacePackage = async () => {
      const pkg = (await (await fetch(pkgUrl)).json()) as { spec: { deployment: { literal: string } } };
      version++;
      pkg.spec.deployment.literal = Buffer.from(`${SLOW}\n// version ${version}\n`).toString('base64');
      const r = await fetch(pkgUrl, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(pkg) });
      if (r.status !== 200) throw new Error(`package update: ${r.status} ${await r.text()}`);
    };
    const steady: WrkResult[] = [];
    const changing: WrkResult[] = [];
    const opts = { seconds: Math.max(6, seconds), connections: 32, threads: 2 };
    for (let round = 0; round < 3; round++) {
      steady.push(await wrk(flintUrl, opts));
      let updating = true;
      const updates = (async () => {
        while (updating) {
          await new Promise((r) => setTimeout(r, 2000));
          if (updating) await replacePackage();
        }
      })();
      changing.push(await wrk(flintUrl, opts));
      updating = false;
      await updates;
    }
    const p99s = median(steady.map((r) => r.p99Us));
    const p99c = median(changing.map((r) => r.p99Us));
    const rpsS = median(steady.map((r) => r.rps));
    const rpsC = median(changing.map((r) => r.rps));
    const bad = changing.reduce((n, r) => n + r.non2xx + r.errors, 0);
    rows.push(['p99 with updates every 2 s / without', `${fmt(p99c / p99s, 2)}x`, `${fmt(p99c / 1000, 1)} ms vs ${fmt(p99s / 1000, 1)} ms (median of 3 alternating rounds, ${version} updates)`, '≤ 1.5x']);
    rows.push(['throughput with updates every 2 s / without', `${fmt(rpsC / rpsS, 2)}x`, `${fmt(rpsC)} vs ${fmt(rpsS)} req/s; ${bad} non-2xx or socket errors during updates`, '≥ 0.95x, no non-2xx']);
  } finally {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
