import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { RouterMetrics } from '../router/metrics.ts';
import { FnTarget } from '../router/targets.ts';
import { fnObj } from '../router/testing/fixtures.ts';
import { type CounterSample, CountWindow, localCounters, parseRouterMetrics, scrapedCounters } from './counters.ts';

const sample = (source: string, requests: number, failures: number): CounterSample => ({ source, counts: new Map([['default/v2', { requests, failures }]]) });

describe("the routers' counters", () => {
  const servers: http.Server[] = [];
  after(() => {
    for (const s of servers) s.close();
  });

  /** A router's /metrics as prom-client writes it, parsed back: the same sums the router keeps. */
  it('reads requests and 5xx answers per function from real router metrics text', async () => {
    const m = new RouterMetrics();
    const v2 = m.statsFor(new FnTarget(fnObj('v2')));
    const odd = m.statsFor(new FnTarget(fnObj('v1', { namespace: 'team-a' })));
    for (const [method, status, n] of [
      ['GET', 200, 7],
      ['POST', 500, 2],
      ['GET', 503, 1],
      ['GET', 404, 4],
    ] as const) {
      for (let i = 0; i < n; i++) m.count(v2, method, status);
    }
    m.count(odd, 'GET', 502);
    m.count(m.none, 'GET', 404);
    const parsed = parseRouterMetrics(await m.registry.metrics());
    assert.deepEqual(parsed.get('default/v2'), { requests: 14, failures: 3 });
    assert.deepEqual(parsed.get('team-a/v1'), { requests: 1, failures: 1 });
    assert.equal(parsed.size, 2, 'requests no function answered are nobody’s');
    assert.deepEqual(Object.fromEntries(parsed), Object.fromEntries(m.functionCounts()));
  });

  it('unescapes label values', () => {
    const text = 'flint_router_requests_total{code="500",method="GET",function="a\\"b",namespace="n"} 3\nflint_router_requests_total_other{function="x"} 1\n';
    assert.deepEqual([...parseRouterMetrics(text)], [['n/a"b', { requests: 3, failures: 3 }]]);
  });

  it('counts one interval from cumulative samples: baseline first, then differences; a restarted router counts from zero; a new one only sets its baseline', () => {
    const w = new CountWindow('default/v2');
    assert.deepEqual(w.advance([sample('a', 10, 1)]), { requests: 0, failures: 0 }, 'the first read is the baseline');
    assert.deepEqual(w.advance([sample('a', 25, 4)]), { requests: 15, failures: 3 });
    assert.deepEqual(w.advance([sample('a', 5, 1), sample('b', 100, 50)]), { requests: 5, failures: 1 }, 'a restarted, b new');
    assert.deepEqual(w.advance([sample('b', 110, 50)]), { requests: 10, failures: 0 }, 'a did not answer: left out');
    assert.deepEqual(w.advance([sample('a', 9, 1), sample('b', 110, 50)]), { requests: 4, failures: 0 }, 'a back, from its last counts');
    assert.deepEqual(w.advance([{ source: 'a', counts: new Map() }]), { requests: 0, failures: 0 }, 'a function a router never served');
  });

  it('reads the router in this process', async () => {
    const local = localCounters(() => new Map([['default/v2', { requests: 3, failures: 1 }]]));
    assert.deepEqual(await local.read(), [{ source: 'local', counts: new Map([['default/v2', { requests: 3, failures: 1 }]]) }]);
  });

  it("scrapes every router's /metrics with the token, leaving out one that does not answer", async () => {
    const auth: string[] = [];
    const serve = async (body: string) => {
      const s = http.createServer((req, res) => {
        auth.push(String(req.headers.authorization));
        if (req.url !== '/metrics') return void res.writeHead(404).end();
        res.writeHead(200, { 'content-type': 'text/plain' }).end(body);
      });
      servers.push(s);
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
    };
    const a = await serve('flint_router_requests_total{code="200",method="GET",function="v2",namespace="default"} 4\n');
    const b = await serve('flint_router_requests_total{code="500",method="GET",function="v2",namespace="default"} 2\n');
    const errors: string[] = [];
    const scraped = scrapedCounters({ routers: async () => [a, b, 'http://127.0.0.1:1'], token: () => 'tok', onError: (url) => errors.push(url) });
    const samples = await scraped.read();
    assert.deepEqual(
      samples.map((s) => [s.source, s.counts.get('default/v2')]),
      [
        [a, { requests: 4, failures: 0 }],
        [b, { requests: 2, failures: 2 }],
      ],
    );
    assert.deepEqual(auth, ['Bearer tok', 'Bearer tok']);
    assert.deepEqual(errors, ['http://127.0.0.1:1']);
  });
});
