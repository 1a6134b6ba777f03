// The API routes the dashboard stands on: the watch as server-sent events
// (framing, the kinds filter keeping secrets out), a function's metrics
// (JSON and pushed), and the test call through the router with a token
// minted for that one function and method.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { FunctionMetricsSource, MetricsSample } from '../api/function-metrics.ts';
import { createTokenIssuer } from '../auth/issuer.ts';
import { createTokenService } from '../auth/tokens.ts';
import { dataLayout } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { createController } from './app.ts';

let dir: string;
let store: Store;
let app: FastifyInstance;
let base: string;
let router: http.Server;
let routerUrl = 'http://127.0.0.1:1';
const seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }> = [];
const listeners = new Set<(s: MetricsSample) => void>();
const tokens = createTokenService({ signingKey: 'k'.repeat(43), issuer: 'flint', expirySeconds: 120 });
const metrics: FunctionMetricsSource = {
  intervalSeconds: 2,
  history: () => [{ t: 1, rps: 1, p50: 0.01, p99: 0.02, errors: 0, coldStarts: 1, instances: 1 }],
  subscribe: (_ns, _name, fn) => {
    listeners.add(fn);
    return () => listeners.delete(fn);
  },
};

/** Reads server-sent events from a response until `enough` says stop. */
async function readEvents(res: Response, enough: (events: Array<{ event: string; id?: string; data: any }>) => boolean) {
  const events: Array<{ event: string; id?: string; data: any }> = [];
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  while (!enough(events)) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const ev: { event: string; id?: string; data: any } = { event: 'message', data: undefined };
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) ev.event = line.slice(7);
        else if (line.startsWith('id: ')) ev.id = line.slice(4);
        else if (line.startsWith('data: ')) ev.data = JSON.parse(line.slice(6));
      }
      if (ev.data !== undefined) events.push(ev);
    }
  }
  await reader.cancel();
  return events;
}

describe('dashboard API routes', () => {
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-dash-'));
    store = openSqliteStore(path.join(dir, 'flint.db'));
    router = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        res.writeHead(201, { 'content-type': 'text/html', 'x-flint-request-id': 'req-1' });
        res.end(`<b>${'y'.repeat(10)}</b>`);
      });
    });
    await new Promise<void>((r) => router.listen(0, '127.0.0.1', r));
    app = await createController({
      store,
      layout: dataLayout(dir),
      info: () => ({ version: 't', mode: 'local', routerUrl, authentication: { enabled: true, authUriPath: '/auth/login' } }),
      localImages: true,
      reservedPaths: [],
      issueToken: createTokenIssuer(tokens, 'admin'),
      functionMetrics: metrics,
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    await store.create({ kind: 'Environment', metadata: { name: 'nodejs', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' } } } as any);
    await store.create({ kind: 'Package', metadata: { name: 'p', namespace: 'default' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: 'eA==' } } } as any);
    await store.create({ kind: 'Function', metadata: { name: 'hello', namespace: 'default' }, spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'p' } } } } as any);
  });
  after(async () => {
    await app.close();
    await new Promise((r) => router.close(r));
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('streams the watch as server-sent events, only of the kinds asked, replaying from a version', async () => {
    const res = await fetch(`${base}/v1/watch?kinds=Function,Environment&resourceVersion=0`, { headers: { accept: 'text/event-stream' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    await store.create({ kind: 'Secret', metadata: { name: 's', namespace: 'default' }, data: { key: 'hidden' } } as any);
    await store.create({ kind: 'ConfigMap', metadata: { name: 'c', namespace: 'default' }, data: {} } as any);
    const events = await readEvents(res, (evs) => evs.length >= 2);
    assert.deepEqual(
      events.map((e) => [e.event, e.data.object.kind, e.data.object.metadata.name]),
      [
        ['ADDED', 'Environment', 'nodejs'],
        ['ADDED', 'Function', 'hello'],
      ],
    );
    assert.equal(events[1].id, events[1].data.object.metadata.resourceVersion);
    assert.equal((await fetch(`${base}/v1/watch?kinds=Function,Nope`)).status, 400);
    assert.equal((await fetch(`${base}/v1/watch?kinds=`)).status, 400);
  });

  it("answers a function's metrics as JSON, and pushes samples with follow=true", async () => {
    const json: any = await (await fetch(`${base}/v1/namespaces/default/functions/hello/metrics`)).json();
    assert.equal(json.intervalSeconds, 2);
    assert.equal(json.samples.length, 1);
    assert.equal((await fetch(`${base}/v1/namespaces/default/functions/nope/metrics?follow=true`)).status, 404);
    const res = await fetch(`${base}/v1/namespaces/default/functions/hello/metrics?follow=true`);
    const pushed = readEvents(res, (evs) => evs.some((e) => e.event === 'sample'));
    setTimeout(() => {
      for (const fn of listeners) fn({ t: 2, rps: 3, p50: null, p99: null, errors: 0, coldStarts: 0, instances: null });
    }, 50);
    const events = await pushed;
    assert.equal(events[0].event, 'history');
    assert.equal(events.at(-1)!.data.rps, 3);
  });

  it('calls the function through the router with a token for that function and method only', async () => {
    routerUrl = `http://127.0.0.1:${(router.address() as { port: number }).port}`;
    const res = await fetch(`${base}/v1/namespaces/default/functions/hello/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ method: 'POST', path: '/sub', headers: { 'X-Test': 'yes' }, query: [['a', '1 2'], ['a', '&']], body: 'payload' }),
    });
    const r: any = await res.json();
    assert.equal(res.status, 200, JSON.stringify(r));
    assert.equal(r.status, 201);
    assert.equal(r.body, '<b>yyyyyyyyyy</b>');
    assert.equal(r.requestId, 'req-1');
    assert.equal(typeof r.durationMs, 'number');
    const got = seen.at(-1)!;
    assert.equal(got.method, 'POST');
    assert.equal(got.url, '/flint-function/default/hello/sub?a=1+2&a=%26');
    assert.equal(got.body, 'payload');
    assert.equal(got.headers['x-test'], 'yes');
    const verified = tokens.verify(String(got.headers.authorization).slice('Bearer '.length));
    assert.ok(verified.ok);
    assert.equal(verified.audience, 'flint-router');
    assert.equal(verified.scope?.refusal('POST', 'default/hello'), undefined);
    assert.ok(verified.scope?.refusal('GET', 'default/hello'), 'another method is refused');
    assert.ok(verified.scope?.refusal('POST', 'default/other'), 'another function is refused');
  });

  it('says clearly when the router is away, and refuses a bad call before sending it', async () => {
    routerUrl = 'http://127.0.0.1:1';
    const res = await fetch(`${base}/v1/namespaces/default/functions/hello/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"method":"GET"}' });
    const body: any = await res.json();
    assert.equal(res.status, 503);
    assert.equal(body.code, 'FLINT_ERR_UNREACHABLE');
    assert.match(body.message, /cannot reach the router/);
    const before = seen.length;
    const bad = await fetch(`${base}/v1/namespaces/default/functions/hello/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ method: 'GET', headers: { 'X-A': 'a\r\nInjected: 1' } }),
    });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as any).field, 'headers.X-A');
    assert.equal((await fetch(`${base}/v1/namespaces/default/functions/nope/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"method":"GET"}' })).status, 404);
    assert.equal(seen.length, before);
  });
});
