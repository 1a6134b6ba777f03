import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { sandboxBinaryPath } from '../../sandbox/bwrap.ts';
import { findGo, GO_BUILD_FLAGS, goLaunch, parseGoMinor, serverCacheKey } from './launch.ts';

let tmp: string;
before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-go-launch-'));
});
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('finding the toolchain', () => {
  it('takes the first executable go on PATH, else the fallback', () => {
    const a = path.join(tmp, 'a');
    const b = path.join(tmp, 'b');
    fs.mkdirSync(a);
    fs.mkdirSync(b);
    fs.writeFileSync(path.join(a, 'go'), '#!/bin/sh\n', { mode: 0o644 });
    fs.writeFileSync(path.join(b, 'go'), '#!/bin/sh\n', { mode: 0o755 });
    assert.equal(findGo(`relative:${a}:${b}`, '/nonexistent/go'), path.join(b, 'go'), 'a file that is not executable is passed over');
    assert.equal(findGo('', path.join(b, 'go')), path.join(b, 'go'));
    assert.equal(findGo(a, '/nonexistent/go'), undefined);
  });

  it('reads the minor version of `go version`', () => {
    assert.equal(parseGoMinor('go version go1.26.8 linux/amd64'), 26);
    assert.equal(parseGoMinor('go version go1.21rc2 linux/arm64'), 21);
    assert.equal(parseGoMinor('go version devel go1.27-abcdef Tue linux/amd64'), 27);
    assert.equal(parseGoMinor('not go'), undefined);
  });
});

describe('the server cache key', () => {
  it('follows the toolchain and every source file', () => {
    const dir = path.join(tmp, 'src');
    fs.mkdirSync(path.join(dir, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'main.go'), 'package main\n');
    fs.writeFileSync(path.join(dir, 'sub', 'x.go'), 'package sub\n');
    const k = serverCacheKey('go version go1.26.8 linux/amd64', '/usr/local/go', dir);
    assert.match(k, /^[0-9a-f]{20}$/);
    assert.equal(serverCacheKey('go version go1.26.8 linux/amd64\n', '/usr/local/go', dir), k, 'stable');
    assert.notEqual(serverCacheKey('go version go1.26.9 linux/amd64', '/usr/local/go', dir), k);
    assert.notEqual(serverCacheKey('go version go1.26.8 linux/amd64', '/usr/lib/go', dir), k);
    fs.writeFileSync(path.join(dir, 'sub', 'x.go'), 'package sub // changed\n');
    assert.notEqual(serverCacheKey('go version go1.26.8 linux/amd64', '/usr/local/go', dir), k);
  });
});

describe('the runtime launch', { skip: findGo() ? false : 'no Go toolchain' }, () => {
  it('builds the server once into the cache and runs it with the memory limit', async () => {
    const [p1, p2] = [goLaunch.prepare!(), goLaunch.prepare!()];
    assert.equal(p1, p2, 'concurrent callers share one build');
    await p1;
    const [bin] = goLaunch.binaries();
    assert.equal(path.basename(bin), 'flint-go-runtime');
    fs.accessSync(bin, fs.constants.X_OK);
    assert.deepEqual(goLaunch.command('/flint/runtime', 96, (p) => p), [bin, '--memlimit-mb=96']);
    assert.deepEqual(goLaunch.command('/flint/runtime', 96, sandboxBinaryPath), ['/flint/bin/flint-go-runtime', '--memlimit-mb=96']);
    assert.ok(fs.existsSync(path.join(goLaunch.dir, 'go.mod')), 'dir is the server source');
  });

  it('puts the binary under $XDG_CACHE_HOME/flint/go-runtime/<key>, leaving no temporary file', () => {
    const go = findGo()!;
    const gocache = execFileSync(go, ['env', 'GOCACHE'], { encoding: 'utf8' }).trim();
    const xdg = path.join(tmp, 'xdg');
    const script = `import { goLaunch } from ${JSON.stringify(pathToFileURL(path.join(import.meta.dirname, 'launch.ts')).href)};
await Promise.all([goLaunch.prepare(), goLaunch.prepare()]);
console.log(goLaunch.binaries()[0]);`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, XDG_CACHE_HOME: xdg, GOCACHE: gocache }, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const bin = r.stdout.trim();
    assert.equal(path.dirname(path.dirname(bin)), path.join(xdg, 'flint', 'go-runtime'));
    assert.deepEqual(fs.readdirSync(path.dirname(bin)), ['flint-go-runtime']);
    const help = spawnSync(bin, ['--port', 'x'], { encoding: 'utf8' });
    assert.equal(help.status, 2, 'the binary runs and refuses a bad flag');
  });

  it('builds functions and server with the same flags, the functions from the server sources', () => {
    const script = fs.readFileSync(path.join(goLaunch.builder!.dir, 'build'), 'utf8');
    // The hand-over the script builds for is the one the runtime speaks.
    const handoff = /handoffTag\s*=\s*"([a-z0-9]+)"/.exec(fs.readFileSync(path.join(goLaunch.dir, 'handoff.go'), 'utf8'))?.[1];
    assert.ok(handoff);
    assert.match(script, new RegExp(`-tags flintfn,${handoff} ${GO_BUILD_FLAGS.join(' ')} `));
    assert.match(script, /GOTOOLCHAIN=local CGO_ENABLED=1 GOENV=off GOFLAGS=/);
    const [source] = goLaunch.builder!.sources!();
    assert.equal(source.env, 'FLINT_GO_RUNTIME_SRC');
    assert.ok(fs.existsSync(path.join(source.host, 'function.go')), 'the server sources');
    assert.ok(!source.at.startsWith('/flint/builder/'), 'not inside the read-only builder bind');
    const env = goLaunch.builder!.env!();
    assert.equal(env.FLINT_GO, fs.realpathSync(findGo()!));
    assert.deepEqual(goLaunch.builder!.path!(), [path.dirname(env.FLINT_GO)]);
    assert.deepEqual(goLaunch.builder!.binaries(), []);
  });
});
