import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { MetricsSample } from '../api/function-metrics.ts';
import { MetricsSampler, type MetricsText } from './metrics-sampler.ts';
import { histogramQuantile, parsePromText } from './prom-text.ts';

/** A router's /metrics text with `n` requests of function hello (`fails` of them 500), each taking `seconds`. */
function routerText(n: number, fails: number, cold: number, seconds: number): string {
  const le = [0.01, 0.1, 1];
  const buckets = le.map((b) => `flint_router_request_duration_seconds_bucket{le="${b}",function="hello",namespace="default"} ${seconds <= b ? n : 0}`);
  return [
    '# HELP flint_router_requests_total Requests',
    '# TYPE flint_router_requests_total counter',
    `flint_router_requests_total{code="200",method="GET",function="hello",namespace="default"} ${n - fails}`,
    `flint_router_requests_total{code="500",method="GET",function="hello",namespace="default"} ${fails}`,
    'flint_router_requests_total{code="404",method="GET",function="",namespace=""} 7',
    `flint_router_cold_starts_total{function="hello",namespace="default"} ${cold}`,
    ...buckets,
    `flint_router_request_duration_seconds_bucket{le="+Inf",function="hello",namespace="default"} ${n}`,
    '',
  ].join('\n');
}

describe('prom-text', () => {
  it('reads samples, labels with escapes, and skips comments and junk', () => {
    const s = parsePromText('# HELP x y\nx{a="q\\"uo\\\\te",b="n\\nl"} 3\ny 4.5\nbroken line here\nz{a="1"} NaN\n');
    assert.deepEqual(s, [
      { name: 'x', labels: { a: 'q"uo\\te', b: 'n\nl' }, value: 3 },
      { name: 'y', labels: {}, value: 4.5 },
    ]);
  });

  it('interpolates quantiles inside buckets, as histogram_quantile does', () => {
    const buckets = [
      { le: 0.1, count: 50 },
      { le: 1, count: 100 },
      { le: Number.POSITIVE_INFINITY, count: 100 },
    ];
    assert.equal(histogramQuantile(0.5, buckets), 0.1);
    assert.ok(Math.abs(histogramQuantile(0.99, buckets)! - 0.982) < 1e-9);
    assert.equal(histogramQuantile(0.5, [{ le: Number.POSITIVE_INFINITY, count: 0 }]), undefined);
    assert.equal(histogramQuantile(0.99, [{ le: 1, count: 1 }, { le: Number.POSITIVE_INFINITY, count: 100 }]), 1, 'past the last bound: that bound');
  });
});

describe('metrics sampler', () => {
  it('turns cumulative counters into per-interval samples, per source, surviving restarts', async () => {
    let texts: MetricsText[] = [];
    const sampler = new MetricsSampler({ read: async () => texts, intervalMs: 2000 });
    const got: MetricsSample[] = [];
    sampler.subscribe('default', 'hello', (s) => got.push(s));
    texts = [{ source: 'a', text: routerText(10, 0, 1, 0.005) }];
    await sampler.tick(1000);
    assert.equal(got.length, 0, 'the first read is the baseline');
    texts = [{ source: 'a', text: routerText(30, 4, 3, 0.005) }];
    await sampler.tick(3000);
    assert.equal(got.length, 1);
    assert.equal(got[0].rps, 10);
    assert.equal(got[0].errors, 4);
    assert.equal(got[0].coldStarts, 2);
    assert.ok(got[0].p50! > 0 && got[0].p50! <= 0.01);
    // Router a restarted (its counts went down), router b appears (baseline only).
    texts = [
      { source: 'a', text: routerText(4, 0, 0, 0.5) },
      { source: 'b', text: routerText(100, 0, 0, 0.5) },
    ];
    await sampler.tick(5000);
    assert.equal(got[1].rps, 2);
    assert.ok(got[1].p50! > 0.1 && got[1].p50! <= 1);
    // A quiet interval is still a sample, so the chart's time moves.
    await sampler.tick(7000);
    assert.deepEqual({ ...got[2], t: 0 }, { t: 0, rps: 0, p50: null, p99: null, errors: 0, coldStarts: 0, instances: null });
    assert.equal(sampler.history('default', 'hello').length, 3);
    assert.equal(sampler.history('', '').length, 0, 'requests that reached no function are nobody\'s');
  });

  it('keeps a bounded ring and a bounded number of functions', async () => {
    let n = 0;
    const text = () => {
      n += 1;
      return `flint_router_requests_total{code="200",method="GET",function="f${n % 5}",namespace="default"} ${n}\n`;
    };
    const sampler = new MetricsSampler({ read: async () => [{ source: 'a', text: text() }], keep: 3, maxFunctions: 2 });
    for (let t = 1; t <= 10; t++) await sampler.tick(t * 1000);
    const followed = [0, 1, 2, 3, 4].filter((i) => sampler.history('default', `f${i}`).length > 0);
    assert.equal(followed.length, 2);
    for (const i of followed) assert.ok(sampler.history('default', `f${i}`).length <= 3);
  });

  it('reads the executor\'s running instances', async () => {
    const exec =
      'flint_executor_instances{function="hello",namespace="default",state="running"} 2\nflint_executor_instances{function="hello",namespace="default",state="starting"} 1\n' +
      'flint_executor_warm_workers{environment="default/nodejs"} 3\n';
    const sampler = new MetricsSampler({ read: async () => [{ source: 'executor', text: exec }] });
    await sampler.tick(1000);
    await sampler.tick(2000);
    assert.equal(sampler.history('default', 'hello')[0].instances, 2);
    assert.equal(sampler.warmPool('default', 'nodejs'), 3);
    assert.equal(sampler.warmPool('default', 'python'), undefined);
  });

  it('reports a failed read and goes on', async () => {
    const errors: unknown[] = [];
    let fail = true;
    const sampler = new MetricsSampler({ read: async () => (fail ? Promise.reject(new Error('down')) : []), onError: (e) => errors.push(e) });
    await sampler.tick(1000);
    fail = false;
    await sampler.tick(2000);
    assert.equal(errors.length, 1);
  });
});
