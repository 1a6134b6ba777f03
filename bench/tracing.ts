// What tracing costs a routed request. One process (bench/tracing-routers.ts)
// runs four routers side by side: the router before tracing existed (`git
// archive` of TRACING_BEFORE_REV, on the same node_modules), the router now
// with tracing off, now with every request traced and its spans exported to
// a real OTLP receiver (the OpenTelemetry Collector's, tools/otlp-receiver),
// and now with tracing on at sampleRatio 0 (trace context handled, nothing
// recorded). A 1-connection keep-alive client per path calls the same hello
// worker directly and through each router, one call of each in turn (the
// turn's order rotating), in 5 rounds; each figure is the difference of the
// medians over rounds of the p50s (and p99s).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { startOtlpReceiver } from '../scripts/otlp-receiver.ts';
import { REPO } from '../test/helpers/server.ts';
import { checkoutOf } from './cli-start.ts';
import { fmt, type Percentiles, percentiles } from './lib.ts';

/** main just before tracing landed. */
export const TRACING_BEFORE_REV = 'bd3871e';

const ROUNDS = 5;

async function startHelloWorker(socketPath: string): Promise<ChildProcess> {
  const code = `require('node:http').createServer((q, s) => { q.resume(); q.on('end', () => { s.writeHead(200, {'content-type': 'text/plain'}); s.end('hello\\n'); }); })
    .listen(${JSON.stringify(socketPath)}, () => console.log('up')).keepAliveTimeout = 60000;`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(child.stdout!, 'data');
  return child;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function tracingBench(requests: number): Promise<string[][]> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bench-tracing-'));
  const socketPath = path.join(work, 'hello.sock');
  const children: ChildProcess[] = [];
  const pools: Pool[] = [];
  const receiver = await startOtlpReceiver(work);
  try {
    children.push(await startHelloWorker(socketPath));
    const before = checkoutOf(TRACING_BEFORE_REV, path.join(work, 'before')) === undefined ? '-' : path.join(work, 'before');
    // The code as it is now, copied as `git archive` copies the old one (bench/tracing-routers.ts says why).
    const copies = ['now', 'now-unsampled'].map((name) => {
      const dir = path.join(work, name);
      for (const d of ['src', 'charts']) fs.cpSync(path.join(REPO, d), path.join(dir, d), { recursive: true });
      fs.copyFileSync(path.join(REPO, 'package.json'), path.join(dir, 'package.json'));
      fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'));
      return dir;
    });
    const host = spawn(process.execPath, [path.join(import.meta.dirname, 'tracing-routers.ts'), socketPath, before, ...copies, receiver.endpoint], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(host);
    const [line] = (await once(host.stdout!, 'data')) as [Buffer];
    const urls = JSON.parse(line.toString()) as Record<string, string>;
    const targets: { name: string; call: () => Promise<void> }[] = [];
    const caller = (pool: Pool, p: string) => async () => {
      const r = await pool.request({ path: p, method: 'GET' });
      const text = await r.body.text();
      if (r.statusCode !== 200) throw new Error(`${p} answered ${r.statusCode}: ${text}`);
    };
    const direct = new Pool('http://localhost', { socketPath, connections: 1 });
    pools.push(direct);
    targets.push({ name: 'direct', call: caller(direct, '/') });
    for (const name of ['before', 'off', 'on', 'unsampled']) {
      if (urls[name] === undefined) continue;
      const pool = new Pool(urls[name], { connections: 1 });
      pools.push(pool);
      targets.push({ name, call: caller(pool, '/hello') });
    }
    // Every path's code warm before measuring (the routers' route tables come from the store's watch: retried until there).
    for (const t of targets) {
      for (let i = 0; ; i++) {
        try {
          await t.call();
          break;
        } catch (err) {
          if (i > 200) throw err;
          await new Promise((r) => setTimeout(r, 25));
        }
      }
    }
    for (let i = 0; i < 1000; i++) for (const t of targets) await t.call();
    // The warm-up's spans arrive before counting starts.
    await new Promise((r) => setTimeout(r, 2500));
    const tracedBefore = receiver.spans().length;
    const per = Math.max(1, Math.floor(requests / ROUNDS));
    const results = new Map<string, Percentiles[]>(targets.map((t) => [t.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      // One call of each target in turn, the turn's order rotating: drift on a busy machine hits every target alike.
      const samples = targets.map(() => new Array<number>(per));
      for (let i = 0; i < per; i++) {
        for (let k = 0; k < targets.length; k++) {
          const at = (i + k) % targets.length;
          const t0 = process.hrtime.bigint();
          await targets[at].call();
          samples[at][i] = Number(process.hrtime.bigint() - t0) / 1000;
        }
      }
      targets.forEach((t, k) => {
        results.get(t.name)!.push(percentiles(samples[k]));
      });
    }
    const p = (name: string, q: 'p50' | 'p99') => median(results.get(name)!.map((r) => r[q]));
    // Each traced request is four spans; let the exporter's last batch arrive.
    const tracedCalls = ROUNDS * per;
    await new Promise((r) => setTimeout(r, 2500));
    const received = receiver.spans().length - tracedBefore;
    const added = (name: string, q: 'p50' | 'p99') => p(name, q) - p('direct', q);
    const how = `median of ${ROUNDS} rounds of ${per} calls of each, taken in turn, one process for all routers`;
    const rows: string[][] = [];
    if (results.has('before')) {
      rows.push([
        'router added latency p50, tracing off - before tracing',
        `${fmt(added('off', 'p50') - added('before', 'p50'))} µs`,
        `off ${fmt(added('off', 'p50'))} µs, before (${TRACING_BEFORE_REV}) ${fmt(added('before', 'p50'))} µs added to direct ${fmt(p('direct', 'p50'))} µs; p99 ${fmt(added('off', 'p99'))} / ${fmt(added('before', 'p99'))} µs (${how})`,
        '≈ 0 (within noise)',
      ]);
    } else {
      rows.push(['router added latency p50, tracing off - before tracing', 'skipped', `no git, or ${TRACING_BEFORE_REV} is not in this clone`, '≈ 0 (within noise)']);
    }
    rows.push([
      'router added latency p50, tracing on - off',
      `${fmt(added('on', 'p50') - added('off', 'p50'))} µs`,
      `on ${fmt(added('on', 'p50'))} µs, off ${fmt(added('off', 'p50'))} µs added; p99 ${fmt(added('on', 'p99'))} / ${fmt(added('off', 'p99'))} µs; ${received} spans received for ${tracedCalls} traced calls (${how})`,
      'reported',
    ]);
    rows.push([
      'router added latency p50, tracing on unsampled - off',
      `${fmt(added('unsampled', 'p50') - added('off', 'p50'))} µs`,
      `sampleRatio 0: ${fmt(added('unsampled', 'p50'))} µs added; p99 ${fmt(added('unsampled', 'p99'))} µs (${how})`,
      'reported',
    ]);
    return rows;
  } finally {
    for (const pool of pools) await pool.close();
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGTERM');
        await once(c, 'exit');
      }
    }
    await receiver.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const rows = await tracingBench(Number(process.env.BENCH_REQUESTS ?? 3000));
  console.log(['| benchmark | result | measured | target |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n'));
}
