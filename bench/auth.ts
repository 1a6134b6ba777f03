// What authentication adds to a routed call. Each pair is two fresh servers
// set up and warmed alike, one with authentication on (called with a valid
// token) and one without, measured in alternating rounds. On a 2-core VM two
// server processes never run quite alike: where the scheduler puts a
// process's router and worker sticks for its life, and moves one pair's
// difference by tens of µs either way (single pairs measured -11 to 135 µs
// for a guard that costs about a µs). The figure is the median over pairs.
import fs from 'node:fs';
import path from 'node:path';
import { Pool } from 'undici';
import { startServer } from '../test/helpers/server.ts';
import { deployHello, fmt, interleavedLatency } from './lib.ts';

/** As many calls as the main benchmark's server has had before its latency figure: the JIT has optimized both alike. */
const WARM_CALLS = 1200;

/** A call of /hello that throws unless it answers 200. */
function caller(pool: Pool, authorization: string | undefined): () => Promise<void> {
  const headers = authorization === undefined ? undefined : { authorization };
  return async () => {
    const res = await pool.request({ path: '/hello', method: 'GET', headers });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`/hello answered ${res.statusCode}: ${text}`);
  };
}

/** Until the route answers (the pool's worker may still be starting), then WARM_CALLS more. */
async function warm(call: () => Promise<void>): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await call();
      break;
    } catch (err) {
      if (i >= 250) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  for (let i = 0; i < WARM_CALLS; i++) await call();
}

async function measurePair(sets: string[], requests: number): Promise<{ on: number; off: number }> {
  const [authed, plain] = await Promise.all([startServer({ sets: [...sets, 'authentication.enabled=true', 'authentication.jwtExpiryTime=3600'] }), startServer({ sets })]);
  const pools: Pool[] = [];
  try {
    const adminToken = fs.readFileSync(path.join(authed.dataDir, 'private', 'admin-token'), 'utf8').trim();
    await Promise.all([deployHello(authed.controllerUrl, 1, adminToken), deployHello(plain.controllerUrl, 1)]);
    const creds = fs.readFileSync(path.join(authed.dataDir, 'private', 'router-credentials.json'), 'utf8');
    const login = await fetch(`${authed.routerUrl}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: creds });
    if (!login.ok) throw new Error(`login answered ${login.status}: ${await login.text()}`);
    const { accesstoken } = (await login.json()) as { accesstoken: string };
    const authPool = new Pool(authed.routerUrl, { connections: 1 });
    const plainPool = new Pool(plain.routerUrl, { connections: 1 });
    pools.push(authPool, plainPool);
    const withToken = caller(authPool, `Bearer ${accesstoken}`);
    const without = caller(plainPool, undefined);
    await warm(withToken);
    await warm(without);
    const { a, b } = await interleavedLatency(withToken, without, requests);
    return { on: a.p50, off: b.p50 };
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await Promise.all([authed.stop(), plain.stop()]);
  }
}

export async function authBench(sandbox: 'bubblewrap' | 'none', requests: number, pairs: number): Promise<string[][]> {
  const sets = [`executor.sandbox=${sandbox}`, 'logLevel=error'];
  const results: { on: number; off: number; delta: number }[] = [];
  for (let i = 0; i < pairs; i++) {
    const r = await measurePair(sets, requests);
    results.push({ ...r, delta: r.on - r.off });
  }
  results.sort((x, y) => x.delta - y.delta);
  const mid = results[Math.floor(results.length / 2)];
  const range = results.length > 1 ? `; pairs ${results.map((r) => fmt(r.delta)).join(', ')} µs` : '';
  return [
    [
      'auth added latency p50 (auth on - off)',
      `${fmt(mid.delta)} µs`,
      `auth on ${fmt(mid.on)} µs, off ${fmt(mid.off)} µs (median of ${results.length} server pairs, each 5 interleaved rounds${range})`,
      '≤ 30 µs',
    ],
  ];
}
