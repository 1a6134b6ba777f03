// Specialization of the real worker process: the code forms it loads and the
// failures it reports.
import assert from 'node:assert/strict';
import path from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { type RunningRuntime, startRuntime } from './testing.ts';
import { eventually } from '../../testing/eventually.ts';

const running: RunningRuntime[] = [];
async function runtime(env?: Record<string, string>): Promise<RunningRuntime> {
  const rt = await startRuntime(env);
  running.push(rt);
  return rt;
}
afterEach(async () => {
  await Promise.all(running.splice(0).map((rt) => rt.stop()));
});

/** Specializes with the given files and entrypoint and returns the function's answer to GET /. */
async function serve(files: Record<string, string>, filepath: string, functionName?: string) {
  const rt = await runtime();
  const dir = rt.write(files);
  const s = await rt.specialize({ filepath: path.join(dir, filepath), functionName });
  assert.equal(s.status, 200, `specialize failed: ${s.text}\n${rt.stderr()}`);
  return { rt, reply: await rt.request('/') };
}

describe('node runtime: before specialization', () => {
  it('answers /healthz and refuses function requests with 503', async () => {
    const rt = await runtime();
    assert.equal((await rt.request('/healthz')).status, 200);
    const r = await rt.request('/anything', { method: 'POST', body: 'x' });
    assert.equal(r.status, 503);
    assert.match(r.json.error, /Generic container/);
  });
});

describe('node runtime: its warm-up call', () => {
  it('is the only request the warm-up route answers: without its token, 503 while generic and the function once specialized', async () => {
    const rt = await runtime();
    const json = { 'content-type': 'application/json' };
    const generic = await rt.request('/flint-warmup?a=1', { method: 'POST', headers: { ...json, 'x-flint-warmup': 'guess' }, body: '{"warm":true}' });
    assert.equal(generic.status, 503, generic.text);
    assert.equal(generic.headers['x-warm'], undefined);
    const dir = rt.write({ 'index.js': 'module.exports = async (ctx) => ({ body: "fn saw " + ctx.request.method + " " + ctx.request.url });' });
    assert.equal((await rt.specialize({ filepath: path.join(dir, 'index.js') })).status, 200);
    const fn = await rt.request('/flint-warmup?a=1', { method: 'POST', headers: { ...json, 'x-flint-function-name': 'f' }, body: '{}' });
    assert.equal(fn.text, 'fn saw POST /flint-warmup?a=1');
  });

  it('reaches the warm handler, not the function, also when the worker is specialized at once', async () => {
    const rt = await runtime({ FLINT_DEBUG: '1' });
    const dir = rt.write({ 'index.js': 'module.exports = async (ctx) => { console.error("fn saw " + ctx.request.url); return { body: "fn" }; };' });
    assert.equal((await rt.specialize({ filepath: path.join(dir, 'index.js') })).status, 200);
    await eventually(() => rt.stderr().includes('POST /flint-warmup?a=1 -> 200'), 'the warm-up call to be answered');
    assert.doesNotMatch(rt.stderr(), /fn saw/);
  });
});

describe('node runtime: loading code', () => {
  it('loads an extensionless CommonJS file (module.exports)', async () => {
    const { reply } = await serve({ deployarchive: 'module.exports = async (context) => ({ status: 200, body: "cjs" });' }, 'deployarchive');
    assert.equal(reply.text, 'cjs');
  });

  it('loads an ESM default export from .mjs', async () => {
    const { reply } = await serve({ 'fn.mjs': 'export default async function (context) { return { body: "esm" }; }' }, 'fn.mjs');
    assert.equal(reply.status, 200);
    assert.equal(reply.text, 'esm');
  });

  it('loads an extensionless file with ESM syntax and top-level await', async () => {
    const code = 'const v = await Promise.resolve("esm-noext");\nexport default async () => ({ body: v });\n';
    const { reply } = await serve({ deployarchive: code }, 'deployarchive');
    assert.equal(reply.text, 'esm-noext');
  });

  it('picks a named export of a file, also from the "file.func" form', async () => {
    const code = 'exports.hello = async () => ({ body: "named" }); exports.other = 1;';
    assert.equal((await serve({ deployarchive: code }, 'deployarchive', 'hello')).reply.text, 'named');
    assert.equal((await serve({ deployarchive: code }, 'deployarchive', 'deployarchive.hello')).reply.text, 'named');
    const esm = 'export const hello = async () => ({ body: "esm-named" });';
    assert.equal((await serve({ 'f.mjs': esm }, 'f.mjs', 'hello')).reply.text, 'esm-named');
  });

  it('resolves "file.func", "file", "func" and no name in a directory', async () => {
    const files = {
      'package.json': JSON.stringify({ main: 'lib/main.js' }),
      'lib/main.js': 'module.exports = async () => ({ body: "main-default" }); module.exports.fromMain = async () => ({ body: "main-named" });',
      'handlers.js': 'exports.get = async () => ({ body: "handlers-get" });',
      'solo.mjs': 'export default async () => ({ body: "solo-default" });',
    };
    assert.equal((await serve(files, '.', 'handlers.get')).reply.text, 'handlers-get');
    assert.equal((await serve(files, '.', 'solo')).reply.text, 'solo-default');
    assert.equal((await serve(files, '.', 'fromMain')).reply.text, 'main-named');
    assert.equal((await serve(files, '.', '')).reply.text, 'main-default');
    const indexOnly = { 'index.js': 'module.exports = async () => ({ body: "index" });', 'util.js': 'exports.x = 1;' };
    assert.equal((await serve(indexOnly, '.')).reply.text, 'index');
  });

  it('runs the code in its own directory, so relative reads work at load time', async () => {
    const files = { 'data/greeting.txt': 'from-a-file', 'index.js': 'const g = require("node:fs").readFileSync("data/greeting.txt", "utf8"); module.exports = async () => ({ body: g });' };
    assert.equal((await serve(files, '.')).reply.text, 'from-a-file');
    assert.equal((await serve(files, 'index.js')).reply.text, 'from-a-file');
  });

  it('accepts a transpiled module whose handler is exports.default', async () => {
    const code = 'Object.defineProperty(exports, "__esModule", { value: true }); exports.default = async () => ({ body: "transpiled" });';
    assert.equal((await serve({ 'index.js': code }, 'index.js')).reply.text, 'transpiled');
  });

  it('v1 /specialize loads <userfunc>/user, adding the extension', async () => {
    const rt = await runtime();
    rt.write({ 'user.js': 'module.exports = async () => ({ body: "v1" });' });
    const s = await rt.request('/specialize', { method: 'POST', headers: { 'content-type': 'text/plain' } });
    assert.equal(s.status, 200, s.text);
    assert.equal((await rt.request('/')).text, 'v1');
  });

  it('merges env into process.env before the code loads', async () => {
    const rt = await runtime();
    const dir = rt.write({ 'index.js': 'const atLoad = process.env.GREETING; module.exports = async () => ({ body: { atLoad, now: process.env.GREETING, other: process.env.OTHER } });' });
    const s = await rt.specialize({ filepath: path.join(dir, 'index.js'), env: { GREETING: 'hi', OTHER: 'x y' } });
    assert.equal(s.status, 200, s.text);
    assert.deepEqual((await rt.request('/')).json, { atLoad: 'hi', now: 'hi', other: 'x y' });
  });

  it('specializes once: a second specialize gets 400', async () => {
    const { rt } = await serve({ 'index.js': 'module.exports = async () => ({ body: "first" });' }, 'index.js');
    const again = await rt.specialize({ filepath: path.join(rt.dir, 'userfunc', 'index.js') });
    assert.equal(again.status, 400);
    assert.match(again.json.error, /Not a generic container/);
    const v1 = await rt.request('/specialize', { method: 'POST' });
    assert.equal(v1.status, 400);
    assert.equal((await rt.request('/')).text, 'first');
  });

  it('answers 400 to a malformed specialize request and stays generic', async () => {
    const rt = await runtime();
    const bad = await rt.request('/v2/specialize', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{nope' });
    assert.equal(bad.status, 400);
    assert.equal((await rt.specialize({ functionName: 'x' })).status, 400, 'filepath is required');
    const dir = rt.write({ 'index.js': 'module.exports = async () => ({ body: "ok" });' });
    assert.equal((await rt.specialize({ filepath: path.join(dir, 'index.js') })).status, 200);
  });
});

describe('node runtime: load failures', () => {
  async function failing(files: Record<string, string>, filepath: string, functionName?: string) {
    const rt = await runtime();
    const dir = rt.write(files);
    const s = await rt.specialize({ filepath: path.join(dir, filepath), functionName });
    return { rt, s };
  }

  it('reports a missing export with 500', async () => {
    const { s } = await failing({ 'index.js': 'exports.a = async () => ({});' }, 'index.js', 'nope');
    assert.equal(s.status, 500);
    assert.match(s.json.error, /no export 'nope'/);
  });

  it('reports an export that is not a function with 500', async () => {
    const { s } = await failing({ 'index.js': 'module.exports = { handler: 42 };' }, 'index.js', 'handler');
    assert.equal(s.status, 500);
    assert.match(s.json.error, /is not a function \(it is number\)/);
  });

  it('reports a syntax error with 500, its message, and the error on stderr', async () => {
    const { rt, s } = await failing({ deployarchive: 'module.exports = async (context => {\n' }, 'deployarchive');
    assert.equal(s.status, 500);
    assert.match(s.json.error, /SyntaxError/);
    assert.match(s.json.error, /deployarchive:\d+/, 'the location of a CommonJS syntax error');
    await eventually(() => rt.stderr().includes('SyntaxError'), 'the syntax error on stderr');
    const after = await rt.specialize({ filepath: path.join(rt.dir, 'userfunc', 'deployarchive') });
    assert.equal(after.status, 400, 'a failed worker is not specialized again');
  });

  it('reports an error thrown while the module loads', async () => {
    const { rt, s } = await failing({ 'index.mjs': 'throw new Error("boom-at-load");' }, 'index.mjs');
    assert.equal(s.status, 500);
    assert.match(s.json.error, /boom-at-load/);
    await eventually(() => rt.stderr().includes('boom-at-load'), 'the load error on stderr');
  });

  it('runs a CommonJS entry once when it requires a module with top-level await', async () => {
    const { rt, s } = await failing(
      { 'index.js': 'console.error("entry ran");\nrequire("./slow.mjs");\nmodule.exports = async () => ({});', 'slow.mjs': 'await 0;\nexport default 1;' },
      'index.js',
    );
    assert.equal(s.status, 500);
    assert.match(s.json.error, /top-level await/);
    await eventually(() => rt.stderr().includes('error specializing'), 'the error on stderr');
    assert.equal(rt.stderr().split('entry ran').length - 1, 1, 'the entry was not run a second time through import()');
  });

  it('answers 404 for a path that does not exist', async () => {
    const { s } = await failing({}, 'missing-file');
    assert.equal(s.status, 404);
    assert.match(s.json.error, /not found/);
  });

  it('reports a directory without an entry module', async () => {
    const { s } = await failing({ 'a.js': 'exports.x = 1', 'b.js': 'exports.y = 2' }, '.');
    assert.equal(s.status, 500);
    assert.match(s.json.error, /no entry module/);
  });
});
