// The run-functions path end to end: a real `flint server`, the real CLI,
// real sandboxed workers, requests over real sockets.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

function ok(args: string[]): string {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function writeCode(name: string, code: string): string {
  const file = path.join(work, name);
  fs.writeFileSync(file, code);
  return file;
}

/** A function that reports which instance served it. */
const IDENTIFY = `
const id = require('node:crypto').randomUUID();
module.exports = async (context) => {
  const q = context.request.query;
  if (q.sleep) await new Promise((r) => setTimeout(r, Number(q.sleep)));
  return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({
    id, path: context.request.url, params: context.request.headers['x-flint-params-id'] ?? null,
    fn: context.request.headers['x-flint-function-name'] }) };
};`;

async function get(url: string, init?: RequestInit) {
  const res = await fetch(server.routerUrl + url, init);
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, text, json, headers: res.headers };
}

function createFn(name: string, code: string, extra: string[] = []) {
  ok(['fn', 'create', '--name', name, '--env', 'nodejs', '--code', writeCode(`${name}.js`, code), ...extra]);
}

describe('run functions', () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-fn-'));
    server = await startServer();
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '2']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('answers over a route and fn test', async () => {
    createFn('hello', 'module.exports = async (context) => ({ status: 200, body: "hello, world\\n" });');
    ok(['route', 'create', '--name', 'hello', '--url', '/hello', '--function', 'hello']);
    const r = await eventually(async () => {
      const x = await get('/hello');
      return x.status === 200 ? x : undefined;
    }, 'the route to answer');
    assert.equal(r.text, 'hello, world\n');
    assert.match(r.headers.get('x-flint-request-id') ?? '', /.+/);
    assert.equal(ok(['fn', 'test', '--name', 'hello']), 'hello, world\n');
  });

  it('matches path parameters, prefixes, methods and the internal path', async () => {
    createFn('ident', IDENTIFY);
    ok(['route', 'create', '--name', 'users', '--url', '/users/{id}', '--function', 'ident']);
    ok(['route', 'create', '--name', 'api', '--prefix', '/api', '--function', 'ident', '--method', 'GET', '--method', 'POST']);
    const p = await eventually(async () => {
      const x = await get('/users/42');
      return x.status === 200 ? x : undefined;
    }, 'the users route');
    assert.equal(p.json.params, '42');
    assert.equal(p.json.fn, 'ident');
    const pre = await get('/api/things?x=1');
    assert.equal(pre.status, 200);
    assert.equal(pre.json.path, '/things?x=1', 'a prefix is stripped, the query kept');
    assert.equal((await get('/api/things', { method: 'POST', body: 'x' })).status, 200);
    const wrongMethod = await get('/users/42', { method: 'DELETE' });
    assert.equal(wrongMethod.status, 405);
    assert.match(wrongMethod.headers.get('allow') ?? '', /GET/);
    const missing = await get('/nothing-here');
    assert.equal(missing.status, 404);
    assert.equal(typeof missing.json.message, 'string');
    assert.ok(missing.json.requestId);
    const internal = await get('/flint-function/ident/sub/path');
    assert.equal(internal.status, 200);
    assert.equal(internal.json.path, '/sub/path');
    assert.equal((await get('/flint-function/default/ident')).status, 200);
  });

  it('turns a thrown error into a 500 and a syntax error into a 500 with the error in fn log', async () => {
    createFn('thrower', 'module.exports = async () => { throw new Error("boom-from-user-code"); };');
    const t = await get('/flint-function/thrower');
    assert.equal(t.status, 500);
    await eventually(() => ok(['fn', 'log', '--name', 'thrower']).includes('boom-from-user-code'), 'the thrown error in fn log');

    createFn('broken', 'module.exports = async (context => {');
    const b = await get('/flint-function/broken');
    assert.equal(b.status, 500);
    await eventually(() => ok(['fn', 'log', '--name', 'broken']).includes('SyntaxError'), 'the syntax error in fn log');
    const r = flint(server, ['fn', 'test', '--name', 'broken'], { cwd: work });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /^Error: Error calling function broken: 500; Please try again or fix the error: /m);
  });

  it('answers 504 for an infinite loop and replaces the worker', async () => {
    createFn(
      'spin',
      `const id = require('node:crypto').randomUUID();
       module.exports = async (context) => { if (context.request.query.spin) { for (;;) {} } return { status: 200, body: id }; };`,
      ['--fntimeout', '2'],
    );
    const first = await get('/flint-function/spin');
    assert.equal(first.status, 200);
    const spun = await get('/flint-function/spin?spin=1');
    assert.equal(spun.status, 504);
    assert.equal(typeof spun.json.message, 'string');
    const after = await eventually(async () => {
      const x = await get('/flint-function/spin');
      return x.status === 200 ? x : undefined;
    }, 'a fresh worker after the timeout');
    assert.notEqual(after.text, first.text, 'the looping worker was replaced');
  });

  it('answers 502 when the worker crashes mid-request, then recovers', async () => {
    createFn(
      'crash',
      `module.exports = async (context) => { if (context.request.query.crash) { setTimeout(() => process.exit(3), 10); await new Promise(() => {}); } return { status: 200, body: 'alive' }; };`,
    );
    assert.equal((await get('/flint-function/crash')).status, 200);
    const crashed = await get('/flint-function/crash?crash=1');
    assert.equal(crashed.status, 502);
    assert.equal(typeof crashed.json.message, 'string');
    const again = await eventually(async () => {
      const x = await get('/flint-function/crash');
      return x.status === 200 ? x : undefined;
    }, 'recovery after the crash');
    assert.equal(again.text, 'alive');
  });

  it('scales out under concurrent load', async () => {
    createFn('busy', IDENTIFY, ['--rpp', '1']);
    await get('/flint-function/busy');
    const answers = await Promise.all(Array.from({ length: 4 }, () => get('/flint-function/busy?sleep=700')));
    for (const a of answers) assert.equal(a.status, 200, a.text);
    const ids = new Set(answers.map((a) => a.json.id));
    assert.ok(ids.size >= 2, `4 concurrent requests with requestsPerPod=1 were served by ${ids.size} instance(s)`);
  });

  it('reaps idle instances', async () => {
    createFn('idle', IDENTIFY, ['--idletimeout', '1']);
    const first = await get('/flint-function/idle');
    assert.equal(first.status, 200);
    await eventually(async () => {
      await new Promise((r) => setTimeout(r, 1500));
      const x = await get('/flint-function/idle');
      return x.status === 200 && x.json.id !== first.json.id;
    }, 'the idle instance to be reaped and a new one to answer', 20_000);
  });

  it('switches to new code on fn update with no failed request', async () => {
    createFn('ver', 'module.exports = async () => ({ status: 200, body: "v1" });');
    assert.equal((await get('/flint-function/ver')).text, 'v1');
    let stop = false;
    const failures: string[] = [];
    const seen = new Set<string>();
    const traffic = (async () => {
      while (!stop) {
        const r = await get('/flint-function/ver');
        if (r.status !== 200) failures.push(`${r.status} ${r.text}`);
        else seen.add(r.text);
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    ok(['fn', 'update', '--name', 'ver', '--code', writeCode('ver2.js', 'module.exports = async () => ({ status: 200, body: "v2" });')]);
    await eventually(() => seen.has('v2'), 'the new version to answer');
    await new Promise((r) => setTimeout(r, 300));
    stop = true;
    await traffic;
    assert.deepEqual(failures, [], 'no request failed during the switch');
    assert.equal((await get('/flint-function/ver')).text, 'v2');
  });

  it('gives functions their env vars, secrets and configmaps', async () => {
    ok(['secret', 'create', '--name', 'creds', '--from-literal', 'token=s3cret']);
    ok(['configmap', 'create', '--name', 'settings', '--from-literal', 'color=blue']);
    createFn(
      'cfg',
      `const fs = require('node:fs');
       module.exports = async () => ({ status: 200, body: JSON.stringify({
         greeting: process.env.GREETING,
         token: fs.readFileSync('/secrets/default/creds/token', 'utf8'),
         color: fs.readFileSync('/configs/default/settings/color', 'utf8') }) });`,
      ['--secret', 'creds', '--configmap', 'settings', '--env-var', 'GREETING=hi'],
    );
    const r = await get('/flint-function/cfg');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { greeting: 'hi', token: 's3cret', color: 'blue' });
  });
});
