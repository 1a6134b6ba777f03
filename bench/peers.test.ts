import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { writeCharts } from './charts.ts';
import { machineCpuDuring, machineTicks, median, spread, startBareServer, stealPercent, type WrkResult } from './lib.ts';
import { BARE, BARE_AGAIN, FLINT, paceScript, peerRows, peerTable, rotation, summarizePeers } from './peers.ts';
import { findProgram, goFailure, haproxyConfig, nginxConfig, startNodePipe } from './proxies.ts';
import type { PeersResult } from './results.ts';

const w = (rps: number, p50Us: number, p99Us: number, non2xx = 0, errors = 0): WrkResult => ({ rps, requests: rps * 4, goodput: rps, p50Us, p99Us, non2xx, errors });

// Three rounds: bare node drifts (the VM's speed), the peers with it.
const ROUNDS: Record<string, WrkResult>[] = [
  { [BARE]: w(40000, 700, 1000), [FLINT]: w(16000, 800, 1600), nginx: w(30000, 730, 1040) },
  { [BARE]: w(30000, 900, 1500), [FLINT]: w(15000, 950, 1700, 2, 1), nginx: w(24000, 920, 1530) },
  { [BARE]: w(50000, 600, 900), [FLINT]: w(20000, 680, 1500), nginx: w(35000, 640, 950) },
];

// The same peers paced: latency without the queueing.
const PACED: Record<string, WrkResult>[] = [
  { [BARE]: w(3000, 100, 200), [FLINT]: w(2990, 160, 300), nginx: w(2995, 130, 240) },
  { [BARE]: w(3000, 110, 260), [FLINT]: w(2990, 170, 400), nginx: w(2995, 135, 280) },
  { [BARE]: w(3000, 90, 180), [FLINT]: w(2990, 150, 330), nginx: w(2995, 120, 230) },
];

describe('peer table math', () => {
  it('median and spread', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.ok(Number.isNaN(median([])));
    assert.deepEqual(spread([5, 1, 3]), { median: 3, min: 1, max: 5 });
  });

  it('rotates the order a round at a time', () => {
    const names = ['a', 'b', 'c'];
    assert.deepEqual([0, 1, 2, 3].map((i) => rotation(names, i).join('')), ['abc', 'bca', 'cab', 'abc']);
  });

  it('takes ratios and added latency within each round, then medians and min-max over rounds', () => {
    const [bare, flint, nginx] = summarizePeers(ROUNDS);
    assert.equal(bare.name, BARE, 'the baseline first');
    assert.deepEqual(bare.ratio, { median: 1, min: 1, max: 1 });
    assert.deepEqual(bare.addedP99, { median: 0, min: 0, max: 0 });
    assert.equal(flint.name, FLINT);
    // Ratios per round 0.4, 0.5, 0.4: not 17,000 / 40,000 from the medians of each side.
    assert.deepEqual(flint.perRound.ratio, [0.4, 0.5, 0.4]);
    assert.deepEqual(flint.ratio, { median: 0.4, min: 0.4, max: 0.5 });
    assert.deepEqual(flint.perRound.addedP50, [100, 50, 80]);
    assert.deepEqual(flint.addedP50, { median: 80, min: 50, max: 100 });
    assert.deepEqual(flint.addedP99, { median: 600, min: 200, max: 600 });
    assert.deepEqual(flint.rps, { median: 16000, min: 15000, max: 20000 });
    assert.equal(flint.non2xx, 2);
    assert.equal(flint.errors, 1);
    assert.deepEqual(nginx.ratio, { median: 0.75, min: 0.7, max: 0.8 });
    assert.deepEqual(nginx.addedP99, { median: 40, min: 30, max: 50 });
  });

  it('needs the baseline in the rounds', () => {
    assert.throws(() => summarizePeers([{ nginx: w(1, 1, 1) }]), /no bare node:http/);
    assert.deepEqual(summarizePeers([]), []);
  });

  const result: PeersResult = { baseline: BARE, targets: { ratio: 0.6, addedP99Us: 200 }, connections: 32, seconds: 4, rounds: 3, summaries: summarizePeers(ROUNDS), paced: summarizePeers(PACED), thinkMs: 10, skipped: [{ name: 'Knative queue-proxy', reason: 'not built: because' }] };

  it('prints the tables with medians and spreads, and the skipped peers with why', () => {
    const t = peerTable(result);
    assert.match(t, /32 connections, 4 s per run, 3 rounds/);
    const [full, paced] = t.split('Paced (each connection waits 0-20 ms at random between requests, 10 ms on average):');
    assert.match(full, /\| Flint router \| 16000 \(15000-20000\) \| 0\.40x \(0\.40x-0\.50x\) \| 800 \(680-950\) \| \+80 \(\+50 to \+100\) \| 1600 \(1500-1700\) \| \+600 \(\+200 to \+600\) \| 2, 1 \|/);
    assert.match(full, /\| bare node:http \| 40000 \(30000-50000\) \| 1x \|/);
    assert.match(full, /\| Knative queue-proxy \| not built: because \|/);
    assert.match(paced, /\| Flint router \| 2990 \(2990-2990\) \| 160 \(150-170\) \| \+60 \(\+60 to \+60\) \| 330 \(300-400\) \| \+140 \(\+100 to \+150\) \| 0, 0 \|/);
    assert.match(paced, /\| nginx \| 2995 \(2995-2995\) \| 130 \(120-135\) \| \+30 \(\+25 to \+30\) \| 240 \(230-280\) \| \+40 \(\+20 to \+50\) \| 0, 0 \|/);
  });

  it("gives the main table the router's figures against the targets", () => {
    const [ratio, p99] = peerRows(result);
    assert.deepEqual(ratio.slice(0, 2), ['peers: throughput via router / bare node:http', '0.40x']);
    assert.match(ratio[2], /0\.40-0\.50x over 3 rounds at 32 connections; nginx 0\.75x/);
    assert.equal(ratio[3], '≥ 0.6x');
    assert.match(p99[0], /paced \(10 ms on average between a connection's requests\)/);
    assert.equal(p99[1], '+140 µs');
    assert.match(p99[2], /^\+100 to \+150 µs .*added p50 \+60 \(\+60 to \+60\) µs; at full load added p99 \+600 \(\+200 to \+600\) µs/);
    assert.equal(p99[3], '≤ 200 µs');
  });

  it("gives the A/A comparison's spread beside the router's, and does not count it among the peers", () => {
    const again = (rounds: Record<string, WrkResult>[], rps: number[], p99: number[]) => rounds.map((r, i) => ({ ...r, [BARE_AGAIN]: w(rps[i], r[BARE].p50Us, p99[i]) }));
    const withAA: PeersResult = {
      ...result,
      summaries: summarizePeers(again(ROUNDS, [36000, 33000, 50000], [1000, 1400, 900])),
      paced: summarizePeers(again(PACED, [3000, 3000, 3000], [250, 230, 180])),
    };
    const [ratio, p99] = peerRows(withAA);
    assert.match(ratio[2], /; nginx 0\.75x; bare node:http against itself \(A\/A\) 1\.00x \(0\.90x-1\.10x\)$/);
    assert.match(p99[2], /; paced, bare node:http against itself \(A\/A\) added p99 0 \(-30 to \+50\) µs$/);
    assert.doesNotMatch(peerRows(result)[0][2], /A\/A/, 'nothing said of an A/A comparison not measured');
  });

  it("reads the hypervisor's steal beside the figures: each round's, the baseline's rate by round, and nothing when not measured", () => {
    const withSteal = (rounds: Record<string, WrkResult>[], steal: number[]) => rounds.map((r, i) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, { ...v, stealPct: steal[i] + (k === BARE ? 0 : 1) }])));
    const stolen: PeersResult = { ...result, summaries: summarizePeers(withSteal(ROUNDS, [2, 25, 0.5])), paced: summarizePeers(withSteal(PACED, [3, 3, 3])) };
    const bare = stolen.summaries.find((s) => s.name === BARE);
    assert.deepEqual(bare?.steal, [2, 25, 0.5]);
    assert.deepEqual(bare?.perRound.rps, [40000, 30000, 50000]);
    const [full, paced] = peerTable(stolen).split('Paced (');
    assert.match(full, /\| Knative queue-proxy \| not built: because \| \| \| \| \| \| \|\n\nSteal/, 'after the table, not inside it');
    assert.match(full, /during these runs: 3\.0% \(0\.5%-26%\) of the machine's CPU time\. bare node:http by round: 40000 req\/s at 2\.0%, 30000 req\/s at 25%, 50000 req\/s at 0\.5%\./);
    assert.match(paced, /during these runs: 4\.0% \(3\.0%-4\.0%\)/);
    assert.match(peerRows(stolen)[0][2], /; the hypervisor's steal during the runs 0\.5-26\.0% of the machine's CPU time$/);
    assert.doesNotMatch(peerTable(result), /Steal/, 'nothing said of a steal not measured');
    assert.doesNotMatch(peerRows(result)[0][2], /steal/);
    const partly = summarizePeers(ROUNDS.map((r, i) => (i === 0 ? r : withSteal([r], [1])[0])));
    assert.equal(partly[0].steal, undefined, 'a round without a reading: no steal figures rather than a median of some');
  });

  it('takes the steal between two readings of /proc/stat', () => {
    assert.equal(stealPercent({ busy: 100, total: 200, steal: 10 }, { busy: 300, total: 600, steal: 50 }), 10);
    assert.equal(stealPercent(undefined, { busy: 1, total: 2, steal: 0 }), undefined);
    assert.equal(stealPercent({ busy: 1, total: 2, steal: 0 }, { busy: 1, total: 2, steal: 0 }), undefined, 'no time passed');
    const now = machineTicks();
    assert.ok(now.steal >= 0 && now.steal <= now.total && now.busy <= now.total);
  });

  it('paces with a random wait around the mean', () => {
    assert.equal(paceScript(10), 'math.randomseed(os.time())\nfunction delay()\n  return math.random(0, 20)\nend\n');
  });

  it('writes the charts as SVG', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-charts-'));
    try {
      const storms = [20, 100].map((n) => ({ runtime: 'node', n, round: 0, burst: 'first' as const, calls: [9000, 30000, 60000], forks: [50000, 90000, 120000], failed: 0, cpuMsPerCall: 80, cpuMsPerFork: 35 }));
      const files = await writeCharts({ peers: result, cold: { flintUs: [6000, 6500, 9000], forkUs: [40000, 42000, 45000] }, storms }, dir);
      assert.deepEqual(files.map((f) => path.basename(f)).sort(), ['cold-start-storms.svg', 'cold-start.svg', 'peers-latency.svg', 'peers-throughput.svg']);
      for (const f of files) {
        const svg = fs.readFileSync(f, 'utf8');
        assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
        assert.match(svg, /Flint/);
      }
      assert.deepEqual(await writeCharts({}, dir), [], 'nothing measured, nothing written');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the Node socket pipe peer', () => {
  it('carries keep-alive requests to the upstream, a connection of its own per client', async () => {
    const bare = await startBareServer({ body: 'through the pipe\n' });
    try {
      const pipe = await startNodePipe({ upstreamPort: bare.port });
      try {
        for (let i = 0; i < 3; i++) {
          const res = await fetch(pipe.url);
          assert.equal(res.status, 200);
          assert.equal(await res.text(), 'through the pipe\n');
        }
      } finally {
        await pipe.stop();
      }
    } finally {
      await bare.stop();
    }
  });

  it('refuses an upstream port that is not one, naming it', () => {
    const main = path.join(import.meta.dirname, 'peers', 'node-pipe', 'main.ts');
    for (const bad of ['0', '70000', 'x']) {
      const r = spawnSync(process.execPath, [main, bad], { encoding: 'utf8', timeout: 10_000 });
      assert.equal(r.status, 2);
      assert.match(r.stderr, new RegExp(`got '${bad}'`));
    }
  });
});

describe('machine CPU during a body', () => {
  it('counts CPU spent by other processes', async () => {
    const busy = await machineCpuDuring(() => new Promise<void>((resolve) => spawn(process.execPath, ['-e', 'const t = Date.now(); while (Date.now() - t < 300);']).on('exit', () => resolve())));
    assert.ok(busy.cpuMs >= 200, `a child spinning 300 ms: ${busy.cpuMs} ms counted`);
  });
});

describe('peer proxy configs', () => {
  const c = { dir: '/tmp/peers-x', listenPort: 4001, upstreamPort: 5001, keepalive: 64 };

  it('nginx: one worker, keep-alive upstream over HTTP/1.1, no access log, its files in the directory', () => {
    const conf = nginxConfig(c);
    assert.match(conf, /^worker_processes 1;$/m);
    assert.match(conf, /upstream fn \{ server 127\.0\.0\.1:5001; keepalive 64; \}/);
    assert.match(conf, /proxy_http_version 1\.1;/);
    assert.match(conf, /proxy_set_header Connection "";/);
    assert.match(conf, /access_log off;/);
    assert.match(conf, /listen 127\.0\.0\.1:4001/);
    assert.match(conf, /^pid \/tmp\/peers-x\/nginx\.pid;$/m);
    assert.match(conf, /proxy_temp_path \/tmp\/peers-x\/proxy-temp;/);
    assert.doesNotMatch(conf, /daemon/, 'daemon off comes from -g');
  });

  it('HAProxy: one thread, HTTP mode, keep-alive, server connections reused', () => {
    const cfg = haproxyConfig(c);
    assert.match(cfg, /^\s+nbthread 1$/m);
    assert.match(cfg, /^\s+mode http$/m);
    assert.match(cfg, /^\s+option http-keep-alive$/m);
    assert.match(cfg, /^\s+http-reuse always$/m);
    assert.match(cfg, /bind 127\.0\.0\.1:4001/);
    assert.match(cfg, /server upstream 127\.0\.0\.1:5001 pool-max-conn 64/);
    for (const t of ['connect', 'client', 'server', 'http-keep-alive']) assert.match(cfg, new RegExp(`timeout ${t} \\d+s`));
  });

  // The configs as the programs themselves read them, where installed.
  const nginx = findProgram('nginx');
  it('nginx accepts its config', { skip: nginx ? false : 'nginx is not installed' }, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-nginx-conf-'));
    try {
      fs.writeFileSync(path.join(dir, 'nginx.conf'), nginxConfig({ ...c, dir }));
      execFileSync(nginx!, ['-t', '-q', '-p', dir, '-e', path.join(dir, 'error.log'), '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'pipe' });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  const haproxy = findProgram('haproxy');
  it('HAProxy accepts its config', { skip: haproxy ? false : 'haproxy is not installed' }, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-haproxy-conf-'));
    try {
      fs.writeFileSync(path.join(dir, 'haproxy.cfg'), haproxyConfig({ ...c, dir }));
      execFileSync(haproxy!, ['-c', '-q', '-f', path.join(dir, 'haproxy.cfg')], { stdio: 'pipe' });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("says which modules a failed go build could not fetch, once each", () => {
    const stderr = [
      'go: downloading knative.dev/serving v0.51.0',
      'x.go:24:2: knative.dev/pkg@v0.0.0-20261026113028-cfa0ac991c5a: reading https://proxy.example/knative.dev/pkg/@v/v0.0.0-20261026113028-cfa0ac991c5a.zip: 403 Forbidden',
      '\tserver response: This module version is not available.',
      'y.go:25:2: knative.dev/pkg@v0.0.0-20261026113028-cfa0ac991c5a: reading https://proxy.example/knative.dev/pkg/@v/v0.0.0-20261026113028-cfa0ac991c5a.zip: 403 Forbidden',
      'z.go:22:2: knative.dev/networking@v0.0.0-20261026130131-cfc431598730: reading https://proxy.example/knative.dev/networking/@v/v0.0.0-20261026130131-cfc431598730.zip: 403 Forbidden',
    ].join('\n');
    assert.equal(
      goFailure(stderr),
      'the module proxy does not serve knative.dev/pkg@v0.0.0-20261026113028-cfa0ac991c5a (403 Forbidden), knative.dev/networking@v0.0.0-20261026130131-cfc431598730 (403 Forbidden), which it requires',
    );
    assert.equal(goFailure('go: downloading a v1\nmain.go:3:1: syntax error\n'), 'main.go:3:1: syntax error');
  });
});
