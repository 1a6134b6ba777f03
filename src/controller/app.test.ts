import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { createControllerAuthCheck } from '../auth/controller-auth.ts';
import { createTokenIssuer } from '../auth/issuer.ts';
import { createTokenService } from '../auth/tokens.ts';
import { dataLayout, functionLogFile } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { createController } from './app.ts';
import { OPENAPI_FILE, renderOpenApi } from './openapi.ts';

let dir: string;
let store: Store;
let app: FastifyInstance;
let base: string;

async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + url, init);
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

const ENV = { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' } } };
const PKG = { metadata: { name: 'hello-pkg' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: Buffer.from('module.exports=()=>"hi"').toString('base64') } } };
const FN = { metadata: { name: 'hello' }, spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'hello-pkg' } } } };
const ROUTE = { metadata: { name: 'r1' }, spec: { relativeurl: '/hello', methods: ['GET'], functionref: { type: 'name', name: 'hello' } } };

const NS = '/v1/namespaces/default';

/** Every refused write must leave the store as it was. */
async function snapshot() {
  const kinds = ['Environment', 'Function', 'Package', 'HTTPTrigger', 'MessageQueueTrigger', 'Secret', 'ConfigMap'] as const;
  const out: unknown[] = [];
  for (const k of kinds) out.push((await store.list(k)).items);
  return JSON.stringify(out);
}

async function refused(method: string, url: string, body: unknown, status: number, code: string, field?: string, headers?: Record<string, string>) {
  const before = await snapshot();
  const r = await call(method, url, body, headers);
  assert.equal(r.status, status, `${method} ${url}: ${r.text}`);
  assert.equal(r.json?.code, code, r.text);
  assert.equal(typeof r.json?.message, 'string');
  if (field !== undefined) assert.equal(r.json.field, field, r.text);
  assert.equal(await snapshot(), before, 'nothing was written');
  return r.json;
}

describe('controller API', () => {
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ctl-'));
    store = openSqliteStore(path.join(dir, 'flint.db'));
    app = await createController({
      store,
      layout: dataLayout(dir),
      info: () => ({ version: 't', mode: 'local', routerUrl: 'http://127.0.0.1:1', authentication: { enabled: false, authUriPath: '/auth/login' } }),
      localImages: true,
      reservedPaths: ['/router-healthz', '/auth/login'],
      bodyLimit: 64 * 1024,
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const a = app.server.address() as { port: number };
    base = `http://127.0.0.1:${a.port}`;
  });
  after(async () => {
    await app.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves Prometheus metrics: the process, resources by kind, packages by build status', async () => {
    assert.equal((await call('POST', `${NS}/environments`, ENV)).status, 201);
    assert.equal((await call('POST', `${NS}/packages`, PKG)).status, 201);
    const m = await call('GET', '/metrics');
    assert.equal(m.status, 200);
    assert.match(m.headers.get('content-type') ?? '', /^text\/plain/);
    assert.match(m.text, /^flint_resources\{kind="Environment",namespace="default"\} 1$/m);
    assert.match(m.text, /^flint_packages\{buildstatus="succeeded"\} 1$/m);
    assert.match(m.text, /^flint_controller_process_cpu_seconds_total /m);
    await call('DELETE', `${NS}/packages/hello-pkg`);
    await call('DELETE', `${NS}/environments/nodejs`);
  });

  it('creates, reads, lists, updates and deletes', async () => {
    const c = await call('POST', `${NS}/environments`, ENV);
    assert.equal(c.status, 201, c.text);
    assert.equal(c.json.kind, 'Environment');
    assert.equal(c.json.apiVersion, 'flint.dev/v1');
    assert.equal(c.json.spec.terminationGracePeriod, 90, 'defaults applied');
    assert.equal(c.json.spec.poolsize, undefined, "poolsize unset: the install's executor.poolSize applies");
    const g = await call('GET', `${NS}/environments/nodejs`);
    assert.deepEqual(g.json, c.json);
    const l = await call('GET', `${NS}/environments`);
    assert.equal(l.json.items.length, 1);
    const all = await call('GET', '/v1/environments');
    assert.equal(all.json.items.length, 1);
    const u = await call('PUT', `${NS}/environments/nodejs`, { ...c.json, spec: { ...c.json.spec, poolsize: 1 } });
    assert.equal(u.status, 200, u.text);
    assert.equal(u.json.spec.poolsize, 1);
    assert.equal(u.json.metadata.uid, c.json.metadata.uid);
    const d = await call('DELETE', `${NS}/environments/nodejs`);
    assert.equal(d.status, 200);
    assert.equal((await call('GET', `${NS}/environments/nodejs`)).status, 404);
  });

  it("keeps a message-queue trigger's status the trigger manager's: a client's copy is ignored on create and update", async () => {
    const mqt = { metadata: { name: 'st' }, spec: { functionref: { type: 'name', name: 'f' }, messageQueueType: 'redis', topic: 'in' }, status: { state: 'consuming' } };
    const c = await call('POST', `${NS}/messagequeuetriggers`, mqt);
    assert.equal(c.status, 201, c.text);
    assert.deepEqual(c.json.status, {}, 'not picked up yet');
    const cur = (await store.get('MessageQueueTrigger', 'default', 'st'))!;
    const waiting = await store.updateStatus({ ...cur, status: { state: 'waiting', message: 'no redis broker' } });
    const u = await call('PUT', `${NS}/messagequeuetriggers/st`, { ...waiting, spec: { ...c.json.spec, maxRetries: 2 }, status: { state: 'error', message: 'made up' } });
    assert.equal(u.status, 200, u.text);
    assert.deepEqual(u.json.status, { state: 'waiting', message: 'no redis broker' });
    const bad = await call('PUT', `${NS}/messagequeuetriggers/st/status`, { status: { state: 'asleep' } });
    assert.equal(bad.status, 400, 'the status subresource takes only a valid status');
    const badMeta = await call('PUT', `${NS}/messagequeuetriggers/st/status`, { metadata: [null], status: { state: 'consuming' } });
    assert.equal(badMeta.status, 400, badMeta.text);
    assert.equal(badMeta.json.field, 'metadata');
    const stale = await call('PUT', `${NS}/messagequeuetriggers/st/status`, { metadata: { resourceVersion: '1' }, status: { state: 'consuming' } });
    assert.equal(stale.status, 409, stale.text);
    assert.equal((await call('DELETE', `${NS}/messagequeuetriggers/st`)).status, 200);
  });

  it("keeps a time trigger's and a canary's status their controller's: a client's copy is ignored on create and update", async () => {
    // A forged lastFireTime would skip due runs; a forged canary status would stop or fake a rollout.
    const tt = { metadata: { name: 'tick' }, spec: { cron: '@every 1m', functionref: { type: 'name', name: 'f' } }, status: { lastFireTime: '2999-01-01T00:00:00Z' } };
    const c = await call('POST', `${NS}/timetriggers`, tt);
    assert.equal(c.status, 201, c.text);
    assert.deepEqual(c.json.status, {});
    const cur = (await store.get('TimeTrigger', 'default', 'tick'))!;
    const ran = await store.updateStatus({ ...cur, status: { lastFireTime: '2026-01-01T00:00:00Z', lastOutcome: 'succeeded' } });
    const u = await call('PUT', `${NS}/timetriggers/tick`, { ...ran, spec: { ...c.json.spec, method: 'GET' }, status: { lastFireTime: '2999-01-01T00:00:00Z' } });
    assert.equal(u.status, 200, u.text);
    assert.deepEqual(u.json.status, { lastFireTime: '2026-01-01T00:00:00Z', lastOutcome: 'succeeded' });
    assert.equal((await call('DELETE', `${NS}/timetriggers/tick`)).status, 200);

    for (const name of ['old', 'new']) {
      await store.create({ apiVersion: 'flint.dev/v1', kind: 'Function', metadata: { name, namespace: 'default' }, spec: FN.spec } as any);
    }
    const weighted = { type: 'function-weights', functionweights: { old: 100, new: 0 } };
    await store.create({ apiVersion: 'flint.dev/v1', kind: 'HTTPTrigger', metadata: { name: 'split', namespace: 'default' }, spec: { relativeurl: '/split', functionref: weighted } } as any);
    const canary = { metadata: { name: 'cc' }, spec: { trigger: 'split', newfunction: 'new', oldfunction: 'old' }, status: { status: 'succeeded' } };
    const cc = await call('POST', `${NS}/canaryconfigs`, canary);
    assert.equal(cc.status, 201, cc.text);
    assert.notEqual(cc.json.status?.status, 'succeeded', 'the forged status is not stored');
    const ccu = await call('PUT', `${NS}/canaryconfigs/cc`, { ...cc.json, status: { status: 'failed', failureRate: 99 } });
    assert.equal(ccu.status, 200, ccu.text);
    assert.deepEqual(ccu.json.status, cc.json.status);
    assert.equal((await call('DELETE', `${NS}/canaryconfigs/cc`)).status, 200);
    await store.delete('HTTPTrigger', 'default', 'split');
    for (const name of ['old', 'new']) await store.delete('Function', 'default', name);
  });

  it('refuses bad input of every kind with a clear error and stores nothing', async () => {
    await refused('POST', `${NS}/environments`, '{"metadata":', 400, 'FLINT_ERR_BAD_JSON');
    await refused('POST', `${NS}/environments`, 'name=x', 415, 'FLINT_ERR_UNSUPPORTED_MEDIA_TYPE', undefined, { 'content-type': 'application/x-www-form-urlencoded' });
    await refused('POST', `${NS}/environments`, [1, 2], 400, 'FLINT_ERR_VALIDATION');
    await refused('POST', `${NS}/environments`, { spec: ENV.spec }, 400, 'FLINT_ERR_VALIDATION', 'metadata');
    await refused('POST', `${NS}/environments`, { ...ENV, metadata: { name: 'Bad_Name' } }, 400, 'FLINT_ERR_VALIDATION', 'metadata.name');
    await refused('POST', `${NS}/environments`, { ...ENV, metadata: { name: 'x'.repeat(64) } }, 400, 'FLINT_ERR_VALIDATION', 'metadata.name');
    await refused('POST', `${NS}/environments`, { ...ENV, bogus: 1 }, 400, 'FLINT_ERR_VALIDATION', 'bogus');
    await refused('POST', `${NS}/environments`, { ...ENV, spec: { ...ENV.spec, poolsize: 'three' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.poolsize');
    await refused('POST', `${NS}/environments`, { ...ENV, spec: { ...ENV.spec, poolsize: -1 } }, 400, 'FLINT_ERR_VALIDATION', 'spec.poolsize');
    await refused('POST', `${NS}/environments`, { ...ENV, spec: { runtime: { image: 'ruby-env' } } }, 400, 'FLINT_ERR_VALIDATION', 'spec.runtime.image');
    await refused('POST', `${NS}/environments`, { ...ENV, kind: 'Function' }, 400, 'FLINT_ERR_VALIDATION', 'kind');
    await refused('POST', `${NS}/environments`, { ...ENV, metadata: { name: 'a', namespace: 'other' } }, 400, 'FLINT_ERR_VALIDATION', 'metadata.namespace');
    await refused('POST', '/v1/namespaces/Bad_NS/environments', ENV, 400, 'FLINT_ERR_VALIDATION');
    await refused('POST', `${NS}/environments`, { ...ENV, spec: { ...ENV.spec, blob: 'x'.repeat(100 * 1024) } }, 413, 'FLINT_ERR_PAYLOAD_TOO_LARGE');
    await refused('POST', `${NS}/functions`, { ...FN, spec: { ...FN.spec, invokeStrategy: { executionStrategy: { executorType: 'newdeploy', minScale: 3, maxScale: 1 } } } }, 400, 'FLINT_ERR_VALIDATION', 'spec.invokeStrategy.executionStrategy.minScale');
    await refused('POST', `${NS}/functions`, { ...FN, spec: { ...FN.spec, functionTimeout: 0 } }, 400, 'FLINT_ERR_VALIDATION', 'spec.functionTimeout');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, relativeurl: 'hello' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.relativeurl');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, relativeurl: '/' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.relativeurl');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, relativeurl: '/a/../b' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.relativeurl');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, relativeurl: '/router-healthz' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.relativeurl');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, relativeurl: '/flint-function/x' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.relativeurl');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, relativeurl: '/u/{id' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.relativeurl');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, relativeurl: '/u/{id:[}' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.relativeurl');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, methods: ['FETCH'] } }, 400, 'FLINT_ERR_VALIDATION', 'spec.methods.0');
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, spec: { ...ROUTE.spec, functionref: { type: 'name' } } }, 400, 'FLINT_ERR_VALIDATION', 'spec.functionref.name');
    const mqt = { metadata: { name: 'q' }, spec: { functionref: { name: 'hello' }, messageQueueType: 'kafka', topic: 'in', respTopic: 'out' } };
    await refused('POST', `${NS}/messagequeuetriggers`, { ...mqt, spec: { ...mqt.spec, respTopic: 'in' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.respTopic');
    await refused('POST', `${NS}/messagequeuetriggers`, { ...mqt, spec: { ...mqt.spec, topic: 'bad topic' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.topic');
    await refused('POST', `${NS}/messagequeuetriggers`, { ...mqt, spec: { ...mqt.spec, maxRetries: -1 } }, 400, 'FLINT_ERR_VALIDATION', 'spec.maxRetries');
    await refused('POST', `${NS}/messagequeuetriggers`, { ...mqt, spec: { ...mqt.spec, messageQueueType: 'sqs' } }, 400, 'FLINT_ERR_VALIDATION', 'spec.messageQueueType');
    await refused('POST', `${NS}/secrets`, { metadata: { name: 's' }, data: { 'bad key': 'v' } }, 400, 'FLINT_ERR_VALIDATION');
    await refused('POST', `${NS}/packages`, { metadata: { name: 'p' }, spec: { environment: { name: 'nodejs' } } }, 400, 'FLINT_ERR_VALIDATION', 'spec');
    await refused('POST', `${NS}/packages`, { metadata: { name: 'p' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: '***' } } }, 400, 'FLINT_ERR_VALIDATION', 'spec.deployment.literal');
    await refused('GET', '/v1/nothing', undefined, 404, 'FLINT_ERR_NOT_FOUND');
    await refused('GET', `${NS}/environments?labelSelector=a%3Db%3Dc`, undefined, 400, 'FLINT_ERR_VALIDATION');
  });

  it('refuses a stale resourceVersion and a duplicate name', async () => {
    const c = await call('POST', `${NS}/configmaps`, { metadata: { name: 'cm' }, data: { a: '1' } });
    assert.equal(c.status, 201);
    await refused('POST', `${NS}/configmaps`, { metadata: { name: 'cm' }, data: { a: '2' } }, 409, 'FLINT_ERR_ALREADY_EXISTS', 'metadata.name');
    const u = await call('PUT', `${NS}/configmaps/cm`, { ...c.json, data: { a: '2' } });
    assert.equal(u.status, 200);
    await refused('PUT', `${NS}/configmaps/cm`, { ...c.json, data: { a: '3' } }, 409, 'FLINT_ERR_CONFLICT', 'metadata.resourceVersion');
    await refused('PUT', `${NS}/configmaps/other`, { ...u.json, data: { a: '3' } }, 400, 'FLINT_ERR_VALIDATION', 'metadata.name');
    await refused('PUT', `${NS}/configmaps/missing`, { metadata: { name: 'missing' }, data: {} }, 404, 'FLINT_ERR_NOT_FOUND');
    await refused('DELETE', `${NS}/configmaps/cm?resourceVersion=1`, undefined, 409, 'FLINT_ERR_CONFLICT');
    assert.equal((await call('DELETE', `${NS}/configmaps/cm`)).status, 200);
  });

  it('keeps environments and packages in use unless forced; warns about missing functions', async () => {
    assert.equal((await call('POST', `${NS}/environments`, ENV)).status, 201);
    const p = await call('POST', `${NS}/packages`, PKG);
    assert.equal(p.status, 201);
    assert.equal(p.json.status.buildstatus, 'succeeded', 'a deploy-only package is ready at once');
    const r = await call('POST', `${NS}/httptriggers`, ROUTE);
    assert.equal(r.status, 201, r.text);
    assert.match(JSON.parse(r.headers.get('x-flint-warnings') ?? '[]')[0], /function 'hello' does not exist yet/);
    await refused('POST', `${NS}/httptriggers`, { ...ROUTE, metadata: { name: 'r2' } }, 409, 'FLINT_ERR_ALREADY_EXISTS');
    assert.equal((await call('POST', `${NS}/httptriggers`, { ...ROUTE, metadata: { name: 'r3' }, spec: { ...ROUTE.spec, methods: ['POST'] } })).status, 201);
    const f = await call('POST', `${NS}/functions`, FN);
    assert.equal(f.status, 201);
    assert.equal(f.headers.get('x-flint-warnings'), null);
    await refused('DELETE', `${NS}/environments/nodejs`, undefined, 409, 'FLINT_ERR_IN_USE');
    await refused('DELETE', `${NS}/packages/hello-pkg`, undefined, 409, 'FLINT_ERR_IN_USE');
    await refused('DELETE', `${NS}/packages/hello-pkg?force=maybe`, undefined, 400, 'FLINT_ERR_VALIDATION', 'force');
    assert.equal((await call('DELETE', `${NS}/packages/hello-pkg?force=true`)).status, 200);
    assert.equal((await call('DELETE', `${NS}/functions/hello`)).status, 200);
    assert.equal((await call('DELETE', `${NS}/environments/nodejs`)).status, 200);
  });

  it('serves function logs, with tail', async () => {
    await call('POST', `${NS}/environments`, ENV);
    await call('POST', `${NS}/packages`, PKG);
    await call('POST', `${NS}/functions`, FN);
    const file = functionLogFile(dataLayout(dir), 'default', 'hello');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, 'one\ntwo\nthree\n');
    assert.equal((await call('GET', `${NS}/functions/hello/logs`)).text, 'one\ntwo\nthree\n');
    assert.equal((await call('GET', `${NS}/functions/hello/logs?tail=2`)).text, 'two\nthree\n');
    await refused('GET', `${NS}/functions/nope/logs`, undefined, 404, 'FLINT_ERR_NOT_FOUND');
    await refused('GET', `${NS}/functions/hello/logs?tail=x`, undefined, 400, 'FLINT_ERR_VALIDATION', 'tail');
    await refused('GET', `${NS}/functions/hello/logs?tail=`, undefined, 400, 'FLINT_ERR_VALIDATION', 'tail');
    await refused('GET', `${NS}/functions/hello/logs?follow=`, undefined, 400, 'FLINT_ERR_VALIDATION', 'follow');
    await refused('GET', `${NS}/functions/hello/logs?follow=yes`, undefined, 400, 'FLINT_ERR_VALIDATION', 'follow');
    assert.equal((await call('GET', `${NS}/functions/hello/logs?follow=false&tail=1`)).text, 'three\n');
  });

  it("picks a function's log lines by request and instance, and heads each instance's lines with --detail", async () => {
    await call('POST', `${NS}/environments`, ENV);
    await call('POST', `${NS}/packages`, PKG);
    await call('POST', `${NS}/functions`, FN);
    const file = functionLogFile(dataLayout(dir), 'default', 'hello');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(
      file,
      [
        't1 [flint] started',
        't2 instance=node-a request=r-1 [stdout] a for r-1',
        't3 instance=node-b request=r-2 [stdout] b for r-2',
        't4 instance=node-a request=r-1 [stderr] a again for r-1',
        't5 instance=node-a [stdout] a alone',
        '',
      ].join('\n'),
    );
    const logs = async (q: string) => (await call('GET', `${NS}/functions/hello/logs${q}`)).text;
    assert.equal(await logs(''), 't1 [flint] started\nt2 request=r-1 [stdout] a for r-1\nt3 request=r-2 [stdout] b for r-2\nt4 request=r-1 [stderr] a again for r-1\nt5 [stdout] a alone\n');
    assert.equal(await logs('?requestId=r-1'), 't2 request=r-1 [stdout] a for r-1\nt4 request=r-1 [stderr] a again for r-1\n');
    assert.equal(await logs('?requestId=r-1&tail=1'), 't4 request=r-1 [stderr] a again for r-1\n');
    assert.equal(await logs('?instance=node-b'), 't3 request=r-2 [stdout] b for r-2\n');
    assert.equal(await logs('?requestId=r-3'), '');
    const head = (i: string) => `\n=== Function=hello Environment=nodejs Namespace=default Instance=${i}\n`;
    assert.equal(await logs('?instance=node-a&detail=true'), `${head('node-a')}t2 request=r-1 [stdout] a for r-1\nt4 request=r-1 [stderr] a again for r-1\nt5 [stdout] a alone\n`);
    assert.equal(await logs('?detail=true&tail=3'), `${head('node-b')}t3 request=r-2 [stdout] b for r-2\n${head('node-a')}t4 request=r-1 [stderr] a again for r-1\nt5 [stdout] a alone\n`);
    // A filter is untrusted input: only an id or an instance name gets through.
    for (const bad of ['a%0Ab', '%1B%5B31m', 'a%20b', 'x'.repeat(193)]) await refused('GET', `${NS}/functions/hello/logs?requestId=${bad}`, undefined, 400, 'FLINT_ERR_VALIDATION', 'requestId');
    await refused('GET', `${NS}/functions/hello/logs?instance=..%2Fx`, undefined, 400, 'FLINT_ERR_VALIDATION', 'instance');

    // Following, the filter applies to what is appended, a line at a time, even one written in two pieces.
    const ac = new AbortController();
    const res = await fetch(`${base}${NS}/functions/hello/logs?follow=true&tail=0&requestId=r-9`, { signal: ac.signal });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    fs.appendFileSync(file, 't6 instance=node-a request=r-8 [stdout] not this one\nt7 instance=node-a request=r-9 [stdout] this ');
    fs.appendFileSync(file, 'one\n');
    let seen = '';
    while (!seen.includes('\n')) seen += new TextDecoder().decode((await reader.read()).value);
    ac.abort();
    assert.equal(seen, 't7 request=r-9 [stdout] this one\n');
  });

  it('checks path and query parameters against the published schema, naming the parameter', async () => {
    await refused('GET', '/v1/namespaces/Bad_NS/secrets', undefined, 400, 'FLINT_ERR_VALIDATION', 'namespace');
    await refused('GET', `${NS}/secrets/${'x'.repeat(64)}`, undefined, 400, 'FLINT_ERR_VALIDATION', 'name');
    await refused('DELETE', `${NS}/secrets/whatever?force=`, undefined, 400, 'FLINT_ERR_VALIDATION', 'force');
    await refused('DELETE', `${NS}/secrets/whatever?resourceVersion=abc`, undefined, 400, 'FLINT_ERR_VALIDATION', 'resourceVersion');
    await refused('GET', `/v1/archives/${'A'.repeat(64)}`, undefined, 400, 'FLINT_ERR_VALIDATION', 'sha256');
    await refused('GET', '/v1/secrets?labelSelector=a%09b', undefined, 400, 'FLINT_ERR_VALIDATION', 'labelSelector');
    await refused('GET', `/v1/secrets?labelSelector=${'a'.repeat(4097)}`, undefined, 400, 'FLINT_ERR_VALIDATION', 'labelSelector');
    await call('POST', `${NS}/secrets`, { metadata: { name: 'labelled', labels: { tier: 'web', 'flint.dev/app': 'x' } } });
    const names = async (sel: string) => (await call('GET', `/v1/secrets?labelSelector=${encodeURIComponent(sel)}`)).json.items.map((i: any) => i.metadata.name);
    assert.deepEqual(await names(' tier = web , flint.dev/app'), ['labelled']);
    assert.deepEqual(await names('tier!=web,!flint.dev/app'), (await names('')).filter((n: string) => n !== 'labelled'));
    // Own labels only: a key every object inherits from Object.prototype selects nothing.
    assert.deepEqual(await names('constructor'), []);
    await call('DELETE', `${NS}/secrets/labelled`);
  });

  it('answers a method a path does not take with 405 and Allow, before reading any body', async () => {
    const r = await call('PATCH', `${NS}/functions/hello`, { spec: {} });
    assert.equal(r.status, 405, r.text);
    assert.equal(r.json.code, 'FLINT_ERR_METHOD_NOT_ALLOWED');
    assert.equal(r.headers.get('allow'), 'GET, HEAD, PUT, DELETE');
    const q = await call('QUERY', '/v1/info');
    assert.equal(q.status, 405, q.text);
    assert.equal(q.headers.get('allow'), 'GET, HEAD');
    const d = await call('DELETE', '/v1/archives', 'bytes', { 'content-type': 'text/x-unknown' });
    assert.equal(d.status, 405, d.text);
    assert.equal(d.headers.get('allow'), 'GET, HEAD, POST');
    await refused('PATCH', '/v1/nothing/here', undefined, 404, 'FLINT_ERR_NOT_FOUND');
  });

  it('streams watch events and resumes from a resourceVersion', async () => {
    const { resourceVersion } = (await call('GET', '/v1/secrets')).json;
    await call('POST', `${NS}/secrets`, { metadata: { name: 's1' }, data: { k: 'v' } });
    const ac = new AbortController();
    const res = await fetch(`${base}/v1/watch?kind=Secret&resourceVersion=${resourceVersion}`, { signal: ac.signal });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    await call('POST', `${NS}/secrets`, { metadata: { name: 's2' }, data: { k: 'v' } });
    let buf = '';
    const names: string[] = [];
    while (names.length < 2) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += Buffer.from(value).toString();
      let i = buf.indexOf('\n');
      while (i >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) names.push(JSON.parse(line).object.metadata.name);
        i = buf.indexOf('\n');
      }
    }
    ac.abort();
    assert.deepEqual(names, ['s1', 's2']);
    await refused('GET', '/v1/watch?kind=Nope', undefined, 400, 'FLINT_ERR_VALIDATION', 'kind');
  });

  it('issues no tokens with authentication off', async () => {
    const r = await call('POST', '/v1/tokens', { audience: 'control-plane' });
    assert.equal(r.status, 409);
    assert.equal(r.json.code, 'FLINT_ERR_CONFLICT');
    assert.match(r.json.message, /authentication is off/);
  });

  it('serves the OpenAPI document, identical to the committed docs/openapi.json', async () => {
    const served = await call('GET', '/openapi.json');
    assert.equal(served.status, 200);
    assert.ok(served.json.paths['/v1/namespaces/{namespace}/functions/{name}']);
    const rendered = await renderOpenApi(app);
    const committed = fs.existsSync(OPENAPI_FILE) ? fs.readFileSync(OPENAPI_FILE, 'utf8') : '';
    assert.equal(rendered, committed, 'docs/openapi.json is stale: run `npm run generate` and commit the result');
  });

  it("answers a function's instances with 404 for no such function, and 501 where this server cannot tell (its instances are pods)", async () => {
    const missing = await call('GET', '/v1/namespaces/default/functions/ghost/instances');
    assert.equal(missing.status, 404);
    assert.equal(missing.json.code, 'FLINT_ERR_NOT_FOUND');
    await store.create({ apiVersion: 'flint.dev/v1', kind: 'Function', metadata: { name: 'podded', namespace: 'default' }, spec: { environment: { name: 'e' }, package: { packageref: { name: 'p' } } } } as any);
    const r = await call('GET', '/v1/namespaces/default/functions/podded/instances');
    assert.equal(r.status, 501);
    assert.match(r.json.message, /kubectl get pods .* -l functionName=podded,functionNamespace=default/);
    await store.delete('Function', 'default', 'podded');
  });
});

describe('controller API with authentication on', () => {
  const tokens = createTokenService({ signingKey: 'k'.repeat(43), issuer: 'flint', expirySeconds: 120 });
  const adminToken = 'A'.repeat(43);
  const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;
  let authDir: string;
  let authStore: Store;
  let authApp: FastifyInstance;
  let url: string;
  before(async () => {
    authDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ctl-auth-'));
    authStore = openSqliteStore(path.join(authDir, 'flint.db'));
    authApp = await createController({
      store: authStore,
      layout: dataLayout(authDir),
      info: () => ({ version: 't', mode: 'local', routerUrl: 'http://127.0.0.1:1', authentication: { enabled: true, authUriPath: '/auth/login' } }),
      localImages: true,
      reservedPaths: [],
      authCheck: createControllerAuthCheck({ adminToken, tokens, credentials: { username: 'admin', password: 'pw' } }),
      issueToken: createTokenIssuer(tokens, 'admin'),
    });
    await authApp.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(authApp.server.address() as { port: number }).port}`;
  });
  after(async () => {
    await authApp.close();
    await authStore.close();
    fs.rmSync(authDir, { recursive: true, force: true });
  });

  const post = async (body: unknown, authorization: string) => {
    const res = await fetch(`${url}/v1/tokens`, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as any, headers: res.headers };
  };

  it('issues control-plane tokens for the Basic credentials, which then open the API', async () => {
    const r = await post({ audience: 'control-plane', ttl: '10m' }, basic('admin', 'pw'));
    assert.equal(r.status, 201);
    assert.equal(r.json.tokentype, 'Bearer');
    assert.equal(r.json.audience, 'flint-control-plane');
    assert.ok(Date.parse(r.json.expiresAt) > Date.now());
    const list = await fetch(`${url}/v1/functions`, { headers: { authorization: `Bearer ${r.json.accesstoken}` } });
    assert.equal(list.status, 200);
    assert.equal((await post({}, basic('admin', 'nope'))).status, 401);
    // No body at all is refused, as the document says it must have one.
    const bare = await fetch(`${url}/v1/tokens`, { method: 'POST', headers: { authorization: basic('admin', 'pw') } });
    assert.equal(bare.status, 400);
    assert.match(((await bare.json()) as { message: string }).message, /send the token request as a JSON object/);
  });

  it('issues scoped router tokens to the admin token, warning about functions that do not exist', async () => {
    const r = await post({ functions: ['ghost'], methods: ['get'] }, `Bearer ${adminToken}`);
    assert.equal(r.status, 201);
    assert.equal(r.json.audience, 'flint-router');
    assert.match(JSON.parse(r.headers.get('x-flint-warnings') ?? '[]')[0], /function 'ghost' does not exist \(yet\) in namespace 'default'/);
    const v = tokens.verify(r.json.accesstoken);
    assert.ok(v.ok && v.scope !== undefined);
    assert.equal(v.scope.refusal('GET', 'default/ghost'), undefined);
    assert.match(v.scope.refusal('POST', 'default/ghost') ?? '', /method POST/);
    const refusedRouter = await fetch(`${url}/v1/functions`, { headers: { authorization: `Bearer ${r.json.accesstoken}` } });
    assert.equal(refusedRouter.status, 401);
  });
});
