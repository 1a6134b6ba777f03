// Packages and builds end to end: a real `flint server`, the real CLI, real
// builders (npm, pip, go) in the build sandbox, real runtimes answering over
// routes, and the failure cases a user meets.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { zipDirectory } from '../src/archive/index.ts';
import { rawZip } from '../src/archive/testing.ts';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

function run(args: string[]) {
  return flint(server, args, { cwd: work });
}

function ok(args: string[]): string {
  const r = run(args);
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function tree(name: string, files: Record<string, string | { text: string; mode: number }>): string {
  const dir = path.join(work, name);
  for (const [rel, content] of Object.entries(files)) {
    const file = path.join(dir, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    if (typeof content === 'string') fs.writeFileSync(file, content);
    else fs.writeFileSync(file, content.text, { mode: content.mode });
  }
  return dir;
}

function info(pkg: string): { status: string; text: string } {
  const text = ok(['package', 'info', '--name', pkg]);
  return { status: /^Status:\s+(\S+)/m.exec(text)?.[1] ?? '', text };
}

async function waitBuild(pkg: string, timeoutMs = 240_000): Promise<{ status: string; text: string }> {
  return eventually(() => {
    const i = info(pkg);
    return i.status === 'succeeded' || i.status === 'failed' ? i : undefined;
  }, `package ${pkg} to finish building`, timeoutMs);
}

const createdPackage = (out: string) => /Package '([^']+)' created/.exec(out)?.[1] as string;

async function call(url: string, init?: RequestInit) {
  const res = await fetch(server.routerUrl + url, init);
  return { status: res.status, text: await res.text() };
}


/** The first 200 answer of a route, once its function is up. */
const firstOk = (url: string) =>
  eventually(async () => {
    const x = await call(url);
    return x.status === 200 ? x : undefined;
  }, `${url} to answer`, 60_000);

describe('packages and builds', () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-pkg-'));
    // Our own data directory: the restart case starts a second server on it.
    server = await startServer({ dataDir: path.join(work, 'data') });
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--builder', 'flint/node-builder', '--poolsize', '1']);
    ok(['env', 'create', '--name', 'python', '--image', 'flint/python-env', '--builder', 'flint/python-builder', '--poolsize', '1']);
    ok(['env', 'create', '--name', 'go', '--image', 'flint/go-env', '--builder', 'flint/go-builder', '--poolsize', '1']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('builds a Go function from a zip and serves it over a route', async () => {
    const src = tree('hello-go', {
      'hello.go': 'package main\n\nimport "net/http"\n\nfunc Handler(w http.ResponseWriter, r *http.Request) {\n\tw.Write([]byte("hello from go " + r.URL.Query().Get("name")))\n}\n',
    });
    const zip = path.join(work, 'hello.zip');
    await zipDirectory(src, zip);
    const pkg = createdPackage(ok(['package', 'create', '--env', 'go', '--src', zip]));
    assert.match(pkg, /^hello-zip-[a-z0-9]{4}$/);
    const built = await waitBuild(pkg);
    assert.equal(built.status, 'succeeded', built.text);
    assert.match(built.text, /^Name:\s+hello-zip-[a-z0-9]{4}\nEnvironment:\s+go\nStatus:\s+succeeded\nBuild Logs:\s*\n/);
    assert.match(built.text, /go build/);
    ok(['fn', 'create', '--name', 'hello-go', '--pkg', pkg, '--entrypoint', 'Handler']);
    ok(['route', 'create', '--name', 'hello-go', '--function', 'hello-go', '--url', '/hello-go']);
    assert.equal((await firstOk('/hello-go?name=flint')).text, 'hello from go flint');

    // A single file (copied read-only into the build) with a main of its own, and another entrypoint.
    const single = path.join(work, 'greet.go');
    fs.writeFileSync(single, 'package main\n\nimport "net/http"\n\nfunc main() { panic("not called") }\n\nfunc Greet(w http.ResponseWriter, r *http.Request) {\n\tw.Write([]byte("greetings from go"))\n}\n', { mode: 0o444 });
    const pkg2 = createdPackage(ok(['package', 'create', '--env', 'go', '--src', single]));
    const built2 = await waitBuild(pkg2);
    assert.equal(built2.status, 'succeeded', built2.text);
    ok(['fn', 'create', '--name', 'greet-go', '--pkg', pkg2, '--entrypoint', 'Greet']);
    ok(['route', 'create', '--name', 'greet-go', '--function', 'greet-go', '--url', '/greet-go']);
    assert.equal((await firstOk('/greet-go')).text, 'greetings from go');
  });

  it('builds a Node.js package with a registry dependency, and moves traffic on fn update --src', async () => {
    const v1 = tree('padder-v1', {
      'package.json': JSON.stringify({ name: 'padder', version: '1.0.0', main: 'index.js', dependencies: { 'left-pad': '1.3.0' } }),
      'index.js': "const leftPad = require('left-pad');\nmodule.exports = async () => ({ body: 'v1:' + leftPad('7', 3, '0') });\n",
    });
    const out = ok(['fn', 'create', '--name', 'padder', '--env', 'nodejs', '--src', v1]);
    const pkg = createdPackage(out);
    assert.match(out, /function 'padder' created/);
    const built = await waitBuild(pkg, 120_000);
    assert.equal(built.status, 'succeeded', built.text);
    assert.match(built.text, /npm install/);
    ok(['route', 'create', '--name', 'padder', '--function', 'padder', '--url', '/padder']);
    assert.equal(ok(['fn', 'test', '--name', 'padder']), 'v1:007');

    const v2 = tree('padder-v2', {
      'package.json': JSON.stringify({ name: 'padder', version: '2.0.0', main: 'index.js', dependencies: { 'left-pad': '1.3.0' } }),
      'index.js': "const leftPad = require('left-pad');\nmodule.exports = async () => ({ body: 'v2:' + leftPad('7', 4, '0') });\n",
    });
    ok(['fn', 'update', '--name', 'padder', '--src', v2]);
    // Until the new build succeeds the old code keeps answering; then the new one does.
    const seen = new Set<string>();
    await eventually(async () => {
      const r = await call('/padder');
      assert.equal(r.status, 200, r.text);
      seen.add(r.text);
      return r.text === 'v2:0007';
    }, 'the new code to answer', 120_000);
    assert.ok([...seen].every((t) => t === 'v1:007' || t === 'v2:0007'), [...seen].join(', '));
  });

  it('builds a Python package with requirements.txt (pyyaml) and uses it', async () => {
    const src = tree('yamler', {
      'requirements.txt': 'pyyaml\n',
      'main.py': 'import yaml\n\ndef main(request):\n    return yaml.safe_dump({"got": yaml.safe_load(request.body)}, default_flow_style=True).strip()\n',
    });
    const pkg = createdPackage(ok(['package', 'create', '--env', 'python', '--src', src, '--name', 'yamler']));
    assert.equal(pkg, 'yamler');
    const built = await waitBuild(pkg, 180_000);
    assert.equal(built.status, 'succeeded', built.text);
    assert.match(built.text, /[Ss]uccessfully installed.*[Pp]y[Yy][Aa][Mm][Ll]/);
    ok(['fn', 'create', '--name', 'yamler', '--pkg', 'yamler', '--entrypoint', 'main.main']);
    assert.equal(ok(['fn', 'test', '--name', 'yamler', '--method', 'POST', '--body', 'a: [1, 2]']), '{got: {a: [1, 2]}}');
  });

  it('shows a failed build with its log, and pkg rebuild runs it again', async () => {
    // Fails the first time, succeeds the second: the build cache outlives a build.
    const src = tree('flaky', {
      'build.sh': { text: '#!/bin/sh\nif [ ! -f "$FLINT_BUILD_CACHE/flaky-once" ]; then touch "$FLINT_BUILD_CACHE/flaky-once"; echo "first attempt fails on purpose" >&2; exit 7; fi\ncp -R "$SRC_PKG" "$DEPLOY_PKG"\n', mode: 0o755 },
      'index.js': 'module.exports = async () => ({ body: "rebuilt" });\n',
    });
    ok(['package', 'create', '--env', 'nodejs', '--src', src, '--name', 'flaky', '--buildcmd', './build.sh']);
    const failed = await waitBuild('flaky');
    assert.equal(failed.status, 'failed', failed.text);
    assert.match(failed.text, /first attempt fails on purpose/);
    assert.match(failed.text, /error building source package: the build command '\.\/build\.sh' exited with code 7/);
    assert.match(ok(['package', 'list']), /^flaky\s+failed\s+nodejs/m);

    assert.match(ok(['package', 'rebuild', '--name', 'flaky']), /Retrying build for pkg flaky/);
    const rebuilt = await waitBuild('flaky');
    assert.equal(rebuilt.status, 'succeeded', rebuilt.text);

    const refused = run(['package', 'rebuild', '--name', 'flaky']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /^Error: package 'flaky' is not in failed state/m);
  });

  it('refuses unsafe archives with a clear error and creates nothing', () => {
    const cases: [string, Buffer, RegExp][] = [
      ['slip.zip', rawZip('../../evil.js', Buffer.from('x')), /\.\.\/\.\.\/evil\.js/],
      ['abs.zip', rawZip('/etc/evil', Buffer.from('x')), /\/etc\/evil/],
      ['link.zip', rawZip('escape', Buffer.from('../../../etc/passwd'), { symlink: true }), /symlink/i],
      ['truncated.zip', rawZip('ok.js', Buffer.from('module.exports = 1')).subarray(0, 40), /zip/i],
    ];
    for (const [name, bytes, re] of cases) {
      fs.writeFileSync(path.join(work, name), bytes);
      const r = run(['package', 'create', '--env', 'nodejs', '--deploy', name, '--name', 'bad-archive']);
      assert.notEqual(r.code, 0, name);
      assert.match(r.stderr, /^Error: /m, name);
      assert.match(r.stderr, re, `${name}: ${r.stderr}`);
      assert.notEqual(run(['package', 'info', '--name', 'bad-archive']).code, 0, `${name}: nothing was created`);
    }
  });

  it('finishes a build cut off by a server restart', async () => {
    const src = tree('slow', {
      'build.sh': { text: '#!/bin/sh\necho starting\nsleep 4\ncp -R "$SRC_PKG" "$DEPLOY_PKG"\necho done\n', mode: 0o755 },
      'index.js': 'module.exports = async () => ({ body: "survived" });\n',
    });
    ok(['package', 'create', '--env', 'nodejs', '--src', src, '--name', 'slow', '--buildcmd', './build.sh']);
    ok(['fn', 'create', '--name', 'slow', '--pkg', 'slow']);
    await eventually(() => info('slow').status === 'running', 'the build to start', 30_000);
    await server.kill();
    server = await startServer({ dataDir: path.join(work, 'data') });
    const built = await waitBuild('slow', 60_000);
    assert.equal(built.status, 'succeeded', built.text);
    assert.match(built.text, /starting\ndone/);
    assert.equal(ok(['fn', 'test', '--name', 'slow']), 'survived');
  });
});
