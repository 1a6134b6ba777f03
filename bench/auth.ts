// What authentication adds to a routed call. Each pair is two fresh servers
// set up and warmed alike, one with authentication on (called with a valid
// token) and one without, measured in alternating rounds. On a 2-core VM two
// server processes never run quite alike: where the scheduler puts a
// process's router and worker sticks for its life, and moves one pair's
// difference by tens of µs either way (single pairs measured -11 to 135 µs
// for a guard that costs about a µs). The figure is the median over pairs.
// A scoped token's extra cost (its scope checked once the route names the
// function) is measured inside the authenticated server of each pair,
// against an unscoped token on the same connection, so no server pairing
// blurs it.
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

interface PairResult {
  on: number;
  off: number;
  /** p50 with a token scoped to the function, and with an unscoped one, on the authenticated server. */
  scoped: number;
  unscoped: number;
}

/** A router token scoped to `hello`, from the control plane's POST /v1/tokens. */
async function scopedToken(controllerUrl: string, adminToken: string): Promise<string> {
  const res = await fetch(`${controllerUrl}/v1/tokens`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ functions: ['hello'], methods: ['GET'], ttl: '1h' }),
  });
  if (res.status !== 201) throw new Error(`POST /v1/tokens answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { accesstoken: string }).accesstoken;
}

async function measurePair(sets: string[], requests: number): Promise<PairResult> {
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
    const withScoped = caller(authPool, `Bearer ${await scopedToken(authed.controllerUrl, adminToken)}`);
    await warm(withScoped);
    const s = await interleavedLatency(withScoped, withToken, requests);
    return { on: a.p50, off: b.p50, scoped: s.a.p50, unscoped: s.b.p50 };
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await Promise.all([authed.stop(), plain.stop()]);
  }
}

export async function authBench(sandbox: 'bubblewrap' | 'none', requests: number, pairs: number): Promise<string[][]> {
  const sets = [`executor.sandbox=${sandbox}`, 'logLevel=error'];
  const results: Array<PairResult & { delta: number; scopeDelta: number }> = [];
  for (let i = 0; i < pairs; i++) {
    const r = await measurePair(sets, requests);
    results.push({ ...r, delta: r.on - r.off, scopeDelta: r.scoped - r.unscoped });
  }
  const byScope = [...results].sort((x, y) => x.scopeDelta - y.scopeDelta);
  const midScope = byScope[Math.floor(byScope.length / 2)];
  const scopeRange = byScope.length > 1 ? `; servers ${byScope.map((r) => fmt(r.scopeDelta, 1)).join(', ')} µs` : '';
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
    [
      'scoped token added latency p50 (scoped - unscoped)',
      `${fmt(midScope.scopeDelta, 1)} µs`,
      `scoped ${fmt(midScope.scoped, 1)} µs, unscoped ${fmt(midScope.unscoped, 1)} µs (same server and connection, median of ${byScope.length} servers, each 5 interleaved rounds${scopeRange})`,
      '≤ 5 µs',
    ],
  ];
}
