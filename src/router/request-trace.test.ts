// Trace context through the router: with tracing off a caller's traceparent
// reaches the function as sent; with it on the router's spans (server,
// route match, acquire, function call) are children of it, and the function
// gets the function call span's context.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { FlintError } from '../api/errors.ts';
import type { AnyResource } from '../api/kinds.ts';
import { openSqliteStore, type SqliteStore } from '../store/sqlite.ts';
import { eventually } from '../testing/eventually.ts';
import { type MemoryTracer, memoryTracer } from '../tracing/testing.ts';
import { SPAN_KIND } from '../tracing/types.ts';
import type { FinishedSpan } from '../tracing/tracer.ts';
import { createRouter, type Router } from './router.ts';
import { call } from './testing/client.ts';
import { type Echo, type EchoWorker, startEchoWorker } from './testing/echo-worker.ts';
import { FakeExecutor } from './testing/fake-executor.ts';
import { fnObj, routeObj } from './testing/fixtures.ts';

const logger = pino({ level: 'silent' });
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const INCOMING = `00-${TRACE}-${PARENT}-01`;

let dir: string;
let store: SqliteStore;
let worker: EchoWorker;
let executor: FakeExecutor;
let plain: Router;
let traced: Router;
let mem: MemoryTracer;

/** A socket whose process died: connecting to it is refused. */
async function deadSocket(): Promise<string> {
  const p = path.join(dir, 'dead.sock');
  const child = spawn(process.execPath, ['-e', `require('node:net').createServer().listen(${JSON.stringify(p)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(child.stdout!, 'data');
  child.kill('SIGKILL');
  await once(child, 'exit');
  return p;
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-router-trace-'));
  store = openSqliteStore(path.join(dir, 'flint.db'));
  worker = await startEchoWorker(dir, 'w');
  executor = new FakeExecutor({ socketPath: worker.socketPath });
  executor.placements.set('default/busy', { error: new FlintError('FLINT_ERR_TOO_MANY_REQUESTS', 'all instances busy') });
  // The first instance is dead; the router sends the request to the next.
  executor.placements.set('default/revived', { socketPath: await deadSocket(), next: { socketPath: worker.socketPath } });
  const objs: AnyResource[] = [fnObj('hello'), fnObj('busy'), fnObj('revived'), routeObj('hello', { relativeurl: '/hello/{who}' }), routeObj('busy', { relativeurl: '/busy', fn: 'busy' })];
  for (const o of objs) await store.create({ ...o, metadata: { name: o.metadata.name, namespace: o.metadata.namespace } } as AnyResource);
  mem = memoryTracer();
  plain = createRouter({ store, executor, logger, host: '127.0.0.1', port: 0 });
  traced = createRouter({ store, executor, logger, host: '127.0.0.1', port: 0, tracer: mem.tracer });
  await plain.start();
  await traced.start();
  for (const r of [plain, traced]) await eventually(async () => (await call(r.url, '/hello/x')).status === 200, 'the routes');
});

after(async () => {
  await plain?.stop();
  await traced?.stop();
  await worker?.close();
  await store?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function echo(base: string, p: string, headers: Record<string, string> = {}): Promise<Echo> {
  const r = await call(base, p, { headers });
  assert.equal(r.status, 200, r.text());
  return r.json();
}

/** The spans of one trace, once its server span has ended. */
async function traceOf(traceId: string): Promise<{ server: FinishedSpan; byName: Map<string, FinishedSpan[]> }> {
  const server = await eventually(() => mem.spans.find((s) => s.traceId === traceId && s.kind === SPAN_KIND.server), `the server span of ${traceId}`);
  const byName = new Map<string, FinishedSpan[]>();
  for (const s of mem.spans) if (s.traceId === traceId) byName.set(s.name, [...(byName.get(s.name) ?? []), s]);
  return { server, byName };
}

describe('router tracing', () => {
  it("passes a caller's traceparent to the function untouched when tracing is off", async () => {
    const e = await echo(plain.url, '/hello/x', { traceparent: INCOMING, tracestate: 'v=1' });
    assert.equal(e.headers.traceparent, INCOMING);
    assert.equal(e.headers.tracestate, 'v=1');
    const none = await echo(plain.url, '/hello/x');
    assert.equal(none.headers.traceparent, undefined);
  });

  it("continues a caller's trace: server, route match, acquire and function call spans, and the call's context to the function", async () => {
    const before = mem.spans.length;
    const e = await echo(traced.url, '/hello/ann', { traceparent: INCOMING, tracestate: 'v=1' });
    const { server, byName } = await traceOf(TRACE);
    assert.equal(server.name, 'GET /hello/{who}');
    assert.equal(server.parentSpanId, PARENT);
    assert.equal(mem.attr(server, 'http.response.status_code'), 200);
    assert.equal(mem.attr(server, 'url.path'), '/hello/ann');
    assert.equal(mem.attr(server, 'flint.function.name'), 'hello');
    assert.equal(typeof mem.attr(server, 'flint.request_id'), 'string');
    const [match] = byName.get('route match') ?? [];
    const [acquire] = byName.get('acquire') ?? [];
    const [fnCall] = byName.get('function call') ?? [];
    for (const s of [match, acquire, fnCall]) {
      assert.ok(s, [...byName.keys()].join(', '));
      assert.equal(s.parentSpanId, server.spanId);
      assert.ok(s.startMs >= server.startMs && s.endMs <= server.endMs, s.name);
    }
    assert.equal(match.kind, SPAN_KIND.internal);
    assert.equal(typeof mem.attr(acquire, 'flint.cold_start'), 'boolean');
    assert.equal(fnCall.kind, SPAN_KIND.client);
    assert.ok(match.endMs <= acquire.startMs && acquire.endMs <= fnCall.startMs);
    // The function is a child of the router's call, in the caller's trace; the caller's tracestate goes along.
    assert.equal(e.headers.traceparent, `00-${TRACE}-${fnCall.spanId}-01`);
    assert.equal(e.headers.tracestate, 'v=1');
    assert.equal(mem.spans.length - before, 4);
  });

  it('starts a trace for a request without a valid traceparent', async () => {
    for (const tp of [undefined, 'nonsense', `00-${TRACE.toUpperCase()}-${PARENT}-01`]) {
      const e = await echo(traced.url, '/hello/x', tp === undefined ? {} : { traceparent: tp });
      const got = String(e.headers.traceparent);
      assert.match(got, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      const traceId = got.slice(3, 35);
      assert.notEqual(traceId, TRACE);
      const { server } = await traceOf(traceId);
      assert.equal(server.parentSpanId, '');
    }
  });

  it("records nothing for an unsampled caller, but passes the trace on with the router's own span id", async () => {
    const before = mem.spans.length;
    const e = await echo(traced.url, '/hello/x', { traceparent: `00-${TRACE}-${PARENT}-00` });
    const got = String(e.headers.traceparent);
    assert.match(got, new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
    assert.notEqual(got.slice(36, 52), PARENT);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(mem.spans.length, before);
  });

  it('marks a request the router answered for the function: the acquire span fails', async () => {
    const traceId = '11111111111111111111111111111111';
    const r = await call(traced.url, '/busy', { headers: { traceparent: `00-${traceId}-${PARENT}-01` } });
    assert.equal(r.status, 429);
    const { server, byName } = await traceOf(traceId);
    assert.equal(mem.attr(server, 'http.response.status_code'), 429);
    const [acquire] = byName.get('acquire') ?? [];
    assert.equal(acquire.statusCode, 2);
    assert.match(acquire.statusMessage, /busy/);
    assert.equal(byName.get('function call'), undefined);
  });

  it('gives each try of a request sent to a second instance its own spans, and the function the last one', async () => {
    const traceId = '22222222222222222222222222222222';
    const e = await echo(traced.url, '/flint-function/revived', { traceparent: `00-${traceId}-${PARENT}-01` });
    const { server, byName } = await traceOf(traceId);
    assert.equal(server.name, 'GET /flint-function/{function}');
    const calls = byName.get('function call') ?? [];
    const acquires = byName.get('acquire') ?? [];
    assert.equal(calls.length, 2);
    assert.equal(acquires.length, 2);
    const failed = calls.find((c) => c.statusCode === 2);
    const ok = calls.find((c) => c.statusCode === 0);
    assert.ok(failed && ok);
    assert.equal(e.headers.traceparent, `00-${traceId}-${ok.spanId}-01`);
  });
});
