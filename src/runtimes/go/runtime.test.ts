// The Go runtime end to end: real function executables compiled by the builder
// script, exec'd by the runtime server (compiled by goLaunch.prepare()) in real
// workers, sandboxed where bubblewrap works here; and one Go plugin, the form
// packages built before took, loaded into the server. The builds share one
// build cache kept in the temporary directory between runs: the first build
// of a machine compiles the standard library (for the plugin, in plugin mode:
// tens of seconds), later ones take a few seconds.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { isFlintError } from '../../api/errors.ts';
import { unixRequest } from '../../executor/process/unix-http.ts';
import { startWorker, type WorkerHandle } from '../../executor/process/worker-process.ts';
import { sandboxAvailable } from '../../sandbox/bwrap.ts';
import { eventually } from '../../testing/eventually.ts';
import { findGo, GO_BUILD_FLAGS, goLaunch } from './launch.ts';

const execFileAsync = promisify(execFile);
const GO = findGo();
const skip = GO ? false : 'no Go toolchain on PATH or in /usr/local/go';
const CACHE = path.join(os.tmpdir(), `flint-go-test-cache-${os.userInfo().uid}`);

// One function package with every kind of symbol; a source directory without go.mod, two files.
const MULTI = {
  'handlers.go': `package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
)

func Handler(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "plain %s env=%s/%s %s", r.URL.Path, os.Getenv("FROM_ENV"), os.Getenv("FROM_SPEC"), greeting())
}

var HandlerFuncVar http.HandlerFunc = func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-kind", "handlerfunc")
	fmt.Fprint(w, "handlerfunc")
}

type counter struct{ n int }

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n++
	fmt.Fprintf(w, "counter %d", c.n)
}

var HandlerIface http.Handler = &counter{}

var StructVar counter

func WithContext(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "context same=%v", ctx == r.Context())
}

var Mux = func() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "mux a") })
	return m
}()

type namedFunc func(http.ResponseWriter, *http.Request)

var Named namedFunc = func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "named") }

func Panics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-lost", "1")
	panic("boom from go")
}

func PanicsLate(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(200)
	fmt.Fprint(w, "partial")
	w.(http.Flusher).Flush()
	panic("late boom")
}

func Files(w http.ResponseWriter, r *http.Request) {
	data, err := os.ReadFile("data.txt")
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Write(data)
}

func MemLimit(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, debug.SetMemoryLimit(-1))
}

var NotAHandler = 42

func WrongSignature(s string) string { return s }

var NilHandler http.Handler

// A package main may have a main of its own: the builder's program never calls it.
func main() { panic("the function's own main ran") }

// Generic functions have no value without type arguments: not an entrypoint, and no build error.
func Generic[T any](t T) T { return t }

var First, Second http.HandlerFunc = func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "first") },
	func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "second") }

// What of the hand-over a function can see: nothing.
func Handover(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "[%s][%s][%s]", os.Getenv("FLINT_GO_LISTENER_FD"), os.Getenv("FLINT_GO_SPECIALIZE_FD"), os.Getenv("FLINT_GO_ENTRYPOINT"))
}
`,
  'greeting.go': 'package main\n\nfunc greeting() string { return "hi" }\n',
  // In the build only without cgo, as the builder's build is: its symbols count, and its package clause is renamed too.
  'nocgo.go': '//go:build !cgo\n\npackage main\n\nimport (\n\t"fmt"\n\t"net/http"\n)\n\nfunc NoCgo(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "no cgo") }\n',
  'withcgo.go': '//go:build cgo\n\npackage main\n\nconst built = "with cgo"\n',
};

const SINGLE = `package main

import (
	"fmt"
	"net/http"
)

func Handler(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "single file") }
`;

// A zip of one folder, with its own go.mod.
const NESTED = {
  // A go line from before generics: the runtime's sources, compiled in this module, still build.
  'hello/go.mod': 'module example.com/hello\n\ngo 1.16\n',
  'hello/main.go': `package main

import "net/http"

func Handler(w http.ResponseWriter, r *http.Request) { w.Write([]byte("nested v1")) }
`,
};

// A function whose initialization panics.
const INIT_PANIC = {
  'f.go': 'package main\n\nimport "net/http"\n\nfunc init() { panic("init boom") }\n\nfunc Handler(w http.ResponseWriter, r *http.Request) {}\n',
};

let root: string;
const built: Record<'multi' | 'single' | 'nested' | 'initPanic', string> = { multi: '', single: '', nested: '', initPanic: '' };
/** SINGLE as a Go plugin, as the builder made it before functions were executables. */
let legacyPlugin = '';
/** MULTI built with the function tag but not the hand-over's: an executable for another version of the runtime. */
let otherHandoff = '';
const workers: WorkerHandle[] = [];
let seq = 0;
const timings: string[] = [];

function writeTree(dir: string, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
}

interface BuildResult {
  code: number | null;
  out: string;
  ms: number;
}

/** Runs builder/build as the build manager would, unsandboxed: cwd = the source's directory. */
function build(srcPkg: string, deployPkg: string): Promise<BuildResult> {
  const b = goLaunch.builder!;
  const tmp = fs.mkdtempSync(path.join(root, 'tmp-'));
  const env: Record<string, string> = {
    PATH: [b.dir, ...(b.path?.() ?? []), '/usr/local/bin', '/usr/bin', '/bin'].join(':'),
    LANG: 'C.UTF-8',
    HOME: tmp,
    TMPDIR: tmp,
    ...b.env?.(),
    ...Object.fromEntries((b.sources?.() ?? []).map((s) => [s.env, s.host])),
    SRC_PKG: srcPkg,
    DEPLOY_PKG: deployPkg,
    FLINT_BUILD_CACHE: CACHE,
  };
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn('build', [], { cwd: fs.statSync(srcPkg).isDirectory() ? srcPkg : path.dirname(srcPkg), env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, out, ms: Date.now() - started }));
  });
}

/** A plugin built the way builder/build did before (-buildmode=plugin, the server's flags). */
async function buildPlugin(source: string): Promise<string> {
  const dir = path.join(root, 'legacy');
  writeTree(dir, { 'go.mod': 'module handler\n\ngo 1.21\n', 'function.go': source });
  const out = path.join(root, 'legacy.so');
  const started = Date.now();
  const env: NodeJS.ProcessEnv = { ...process.env, GOCACHE: path.join(CACHE, 'go-build'), GOMODCACHE: path.join(CACHE, 'gomod'), GOTOOLCHAIN: 'local', CGO_ENABLED: '1', GOENV: 'off', GOFLAGS: '' };
  await execFileAsync(GO!, ['build', '-buildmode=plugin', ...GO_BUILD_FLAGS, '-o', out, '.'], { cwd: dir, env, maxBuffer: 16 << 20 });
  timings.push(`legacy plugin ${Date.now() - started} ms`);
  return out;
}

async function buildOk(name: string, srcPkg: string): Promise<string> {
  const deploy = path.join(root, `${name}.deploy`);
  const r = await build(srcPkg, deploy);
  timings.push(`${name} ${r.ms} ms`);
  assert.equal(r.code, 0, `building ${name} failed:\n${r.out}`);
  assert.ok(fs.statSync(deploy).isFile(), 'the executable is one file at DEPLOY_PKG');
  return deploy;
}

before(
  async () => {
    if (skip) return;
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-go-'));
    writeTree(path.join(root, 'multi'), MULTI);
    fs.mkdirSync(path.join(root, 'single'));
    // As the build manager hands over a source that is one plain file.
    fs.writeFileSync(path.join(root, 'single', 'source'), SINGLE);
    writeTree(path.join(root, 'nested'), NESTED);
    writeTree(path.join(root, 'init-panic'), INIT_PANIC);
    const t0 = Date.now();
    const runtime = goLaunch.prepare!().then(() => timings.push(`runtime server ready ${Date.now() - t0} ms`));
    // The first build fills the cache; the others reuse it.
    built.multi = await buildOk('multi (first)', path.join(root, 'multi'));
    [built.single, built.nested, built.initPanic, legacyPlugin] = await Promise.all([
      buildOk('single', path.join(root, 'single', 'source')),
      buildOk('nested', path.join(root, 'nested')),
      buildOk('init-panic', path.join(root, 'init-panic')),
      buildPlugin(SINGLE),
    ]);
    otherHandoff = path.join(root, 'other-handoff');
    const goEnv = { ...process.env, GOCACHE: path.join(CACHE, 'go-build'), GOMODCACHE: path.join(CACHE, 'gomod'), GOTOOLCHAIN: 'local', CGO_ENABLED: '0', GOENV: 'off', GOFLAGS: '-mod=mod' };
    await execFileAsync(GO!, ['build', '-tags', 'flintfn', '-o', otherHandoff, './flint_function_main'], { cwd: path.join(root, 'multi'), env: goEnv, maxBuffer: 16 << 20 });
    await runtime;
  },
  { timeout: 600_000 },
);
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
});
after(() => {
  if (timings.length) process.stderr.write(`go build timings: ${timings.join(', ')}\n`);
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

describe('go builder', { skip }, () => {
  it('builds a directory without go.mod, a single file (as function.go) and a zipped folder with go.mod', () => {
    assert.ok(fs.existsSync(path.join(root, 'multi', 'go.mod')), 'go mod init ran in the source');
    assert.match(fs.readFileSync(path.join(root, 'multi', 'go.mod'), 'utf8'), /^module handler$/m);
    assert.ok(!fs.existsSync(path.join(root, 'single', 'go.mod')), 'a single file is built in a directory of its own');
    for (const p of Object.values(built)) assert.equal(fs.readFileSync(p).subarray(0, 4).toString('latin1'), '\x7fELF');
  });

  it('fails with the compiler output on a broken source, and on a package that is not main', async () => {
    const broken = path.join(root, 'broken');
    writeTree(broken, { 'f.go': 'package main\n\nfunc Handler( {\n' });
    const r = await build(broken, path.join(root, 'broken.deploy'));
    assert.notEqual(r.code, 0);
    assert.match(r.out, /f\.go:3/);
    assert.ok(!fs.existsSync(path.join(root, 'broken.deploy')));
    const lib = path.join(root, 'lib');
    writeTree(lib, { 'f.go': 'package lib\n\nfunc X() {}\n' });
    const r2 = await build(lib, path.join(root, 'lib.deploy'));
    assert.notEqual(r2.code, 0);
    assert.match(r2.out, /main package/);
  });

  it("refuses a source that brings its own flint_function_main/ (it would replace the runtime's code)", async () => {
    const src = path.join(root, 'own-main');
    writeTree(src, { 'f.go': SINGLE, 'flint_function_main/main.go': 'package main\n\nfunc main() {}\n' });
    const r = await build(src, path.join(root, 'own-main.deploy'));
    assert.notEqual(r.code, 0);
    assert.match(r.out, /the source holds flint_function_main\/, a name the builder needs/);
    assert.ok(!fs.existsSync(path.join(root, 'own-main.deploy')));
    assert.equal(fs.readFileSync(path.join(src, 'f.go'), 'utf8'), SINGLE, 'nothing rewritten');
  });

  it('builds a package with C code with cgo, and one without as a static executable', async () => {
    const src = path.join(root, 'cgo');
    writeTree(src, {
      'f.go': 'package main\n\n// static int add(int a, int b) { return a + b; }\nimport "C"\n\nimport (\n\t"fmt"\n\t"net/http"\n)\n\nfunc Handler(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, C.add(1, 2)) }\n',
    });
    const deploy = path.join(root, 'cgo.deploy');
    const r = await build(src, deploy);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /CGO_ENABLED=1 go build/);
    // The program interpreter's path sits in the first page of a dynamically linked executable.
    const interp = (file: string) => fs.readFileSync(file).subarray(0, 4096).toString('latin1').includes('/ld-linux');
    assert.equal(interp(deploy), true, 'linked with the C library');
    assert.equal(interp(built.single), false, 'a package without C code is static');
    const run = (exe: string) =>
      new Promise<string>((resolve, reject) => {
        const sock = path.join(root, `${path.basename(exe)}.sock`);
        const child = spawn(exe, ['--socket', sock], { stdio: 'ignore' });
        const stop = () => child.kill('SIGKILL');
        eventually(async () => {
          try {
            return (await unixRequest(sock, 'GET', '/', { timeoutMs: 2000 })).text;
          } catch {
            return undefined;
          }
        }, 'the executable to answer').then((t) => {
          stop();
          resolve(t);
        }, (err) => {
          stop();
          reject(err);
        });
      });
    // Run by hand, an executable listens itself and serves its Handler.
    assert.equal(await run(deploy), '3');
  });
});

const sandboxes: Array<'none' | 'bubblewrap'> = ['none'];
if (await sandboxAvailable()) sandboxes.push('bubblewrap');

for (const sandbox of sandboxes) describe(`go runtime worker (${sandbox})`, { skip }, () => {
  const lines: string[] = [];

  async function start(env?: Record<string, string>): Promise<WorkerHandle> {
    const id = `go${++seq}-${process.pid}`;
    const w = await startWorker({
      id,
      runtime: 'go',
      instanceDir: path.join(root, 'instances', id),
      sandbox,
      allowNetwork: false,
      memoryMB: 128,
      env,
      onOutput: (line) => lines.push(line),
    });
    workers.push(w);
    return w;
  }

  const deployarchive = (w: WorkerHandle) => path.posix.join(w.sandboxDirs.userfunc, 'deployarchive');

  async function deploy(executable: string, functionName?: string, env?: Record<string, string>): Promise<WorkerHandle> {
    const w = await start(env ? { FROM_ENV: 'runtime-env' } : undefined);
    fs.copyFileSync(executable, path.join(w.hostDirs.userfunc, 'deployarchive'));
    await w.specialize({ filepath: deployarchive(w), functionName, env }, 20_000);
    return w;
  }

  const call = (w: WorkerHandle, urlPath = '/', method = 'GET', body?: unknown) => unixRequest(w.socketPath, method, urlPath, { body, timeoutMs: 10_000 });

  async function rejectsWith(p: Promise<unknown>, message: RegExp): Promise<void> {
    await assert.rejects(p, (err: unknown) => {
      assert.ok(isFlintError(err), `expected a FlintError, got ${String(err)}`);
      assert.equal(err.code, 'FLINT_ERR_SPECIALIZE_FAILED');
      assert.match(err.message, message);
      return true;
    });
  }

  it('is generic until specialized, then serves every path', async () => {
    const w = await start();
    assert.deepEqual(await call(w, '/healthz'), { status: 200, text: 'ok\n' });
    const generic = await call(w, '/anything');
    assert.equal(generic.status, 500);
    assert.deepEqual(JSON.parse(generic.text), { error: 'Generic container: no requests supported' });
    fs.copyFileSync(built.multi, path.join(w.hostDirs.userfunc, 'deployarchive'));
    await w.specialize({ filepath: deployarchive(w) }, 20_000);
    assert.deepEqual(await call(w, '/x/y?q=1'), { status: 200, text: 'plain /x/y env=/ hi' });
    const r = await unixRequest(w.socketPath, 'POST', '/v2/specialize', { body: {}, timeoutMs: 10_000 });
    assert.equal(r.status, 400, 'a second specialization is refused');
    assert.match(JSON.parse(r.text).error, /^Not a generic container/);
    assert.deepEqual(await call(w, '/healthz'), { status: 200, text: 'ok\n' }, 'the executor still reaches /healthz');
    // The router's requests name the function: they reach it even on a control path.
    const routed = await new Promise<string>((resolve, reject) => {
      const req = http.request({ socketPath: w.socketPath, path: '/healthz', headers: { 'x-flint-function-name': 'f' } }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(routed, 'plain /healthz env=/ hi');
  });

  it('accepts each kind of handler symbol', async () => {
    const cases: Array<[string, string, string]> = [
      ['Handler', '/p', 'plain /p env=/ hi'],
      ['HandlerFuncVar', '/', 'handlerfunc'],
      ['HandlerIface', '/', 'counter 1'],
      ['StructVar', '/', 'counter 1'],
      ['WithContext', '/', 'context same=true'],
      ['Mux', '/a', 'mux a'],
      ['Named', '/', 'named'],
      ['First', '/', 'first'],
      ['Second', '/', 'second'],
      ['NoCgo', '/', 'no cgo'],
      // The hand-over's variables are gone before the function runs.
      ['Handover', '/', '[][][]'],
    ];
    await Promise.all(
      cases.map(async ([fn, urlPath, text]) => {
        const w = await deploy(built.multi, fn);
        assert.deepEqual(await call(w, urlPath), { status: 200, text }, fn);
      }),
    );
  });

  it('merges the specialize env, keeps the runtime env, and applies the memory limit', async () => {
    const w = await deploy(built.multi, 'Handler', { FROM_SPEC: 'spec-env' });
    assert.equal((await call(w)).text, 'plain / env=runtime-env/spec-env hi');
    // A function's env cannot point the hand-over elsewhere (stdin) or pick another entrypoint.
    const redirected = await deploy(built.multi, 'Handler', { FLINT_GO_LISTENER_FD: '0', FLINT_GO_SPECIALIZE_FD: '1', FLINT_GO_ENTRYPOINT: 'Panics' });
    assert.equal((await call(redirected)).text, 'plain / env=runtime-env/ hi');
    const m = await start();
    fs.copyFileSync(built.multi, path.join(m.hostDirs.userfunc, 'deployarchive'));
    await m.specialize({ filepath: deployarchive(m), functionName: 'MemLimit' }, 20_000);
    assert.equal((await call(m)).text, String(m.limits.heapMB * 1024 * 1024));
  });

  it('runs the function from a directory (a deploy archive unpacked), in that directory', async () => {
    const w = await start();
    const dir = path.join(w.hostDirs.userfunc, 'deployarchive');
    fs.mkdirSync(dir);
    // As the build manager stores a one-file build output: zipped as `deploy`.
    fs.copyFileSync(built.multi, path.join(dir, 'deploy'));
    fs.writeFileSync(path.join(dir, 'data.txt'), 'next to the function');
    await w.specialize({ filepath: deployarchive(w), functionName: 'Files' }, 20_000);
    assert.deepEqual(await call(w), { status: 200, text: 'next to the function' });
    // A single .so (a plugin) wins over the first file.
    const v = await start();
    const vdir = path.join(v.hostDirs.userfunc, 'deployarchive');
    fs.mkdirSync(vdir);
    fs.writeFileSync(path.join(vdir, 'README'), 'not a plugin');
    fs.copyFileSync(legacyPlugin, path.join(vdir, 'handler.so'));
    await v.specialize({ filepath: deployarchive(v) }, 20_000);
    assert.equal((await call(v)).text, 'single file');
  });

  it('serves a single-file build and a v1 specialize of /userfunc/user', async () => {
    const s = await deploy(built.single);
    assert.equal((await call(s)).text, 'single file');
    const w = await start();
    fs.copyFileSync(built.nested, path.join(w.hostDirs.userfunc, 'user'));
    const r = await unixRequest(w.socketPath, 'POST', '/specialize', { timeoutMs: 20_000 });
    assert.equal(r.status, 200, r.text);
    assert.equal((await call(w)).text, 'nested v1');
  });

  it('refuses a missing symbol, a wrong type, a nil variable, a file that is no function, a panicking init, a missing path', async () => {
    const cases: Array<[string | undefined, RegExp]> = [
      ['Nope', /error specializing function: symbol "Nope" not found/],
      ['NotAHandler', /symbol "NotAHandler": has type \*int; want http\.Handler/],
      ['WrongSignature', /has type func\(string\) string/],
      ['Generic', /symbol "Generic" not found/],
      ['NilHandler', /NilHandler": is a variable of type http\.Handler that is nil/],
    ];
    await Promise.all(
      cases.map(async ([fn, message]) => {
        const w = await start();
        fs.copyFileSync(built.multi, path.join(w.hostDirs.userfunc, 'deployarchive'));
        await rejectsWith(w.specialize({ filepath: deployarchive(w), functionName: fn }, 20_000), message);
        // A failed load is final.
        const again = await unixRequest(w.socketPath, 'POST', '/v2/specialize', { body: { filepath: deployarchive(w), functionName: 'Handler' }, timeoutMs: 10_000 });
        assert.equal(again.status, 400);
      }),
    );
    const bad = await start();
    fs.writeFileSync(path.join(bad.hostDirs.userfunc, 'deployarchive'), 'package main\n');
    await rejectsWith(bad.specialize({ filepath: deployarchive(bad) }, 20_000), /error specializing function: \/.*deployarchive is not a Go function: .*--src/);
    const elf = await start();
    fs.copyFileSync(fs.realpathSync('/bin/true'), path.join(elf.hostDirs.userfunc, 'deployarchive'));
    await rejectsWith(elf.specialize({ filepath: deployarchive(elf) }, 20_000), /error specializing function: plugin\.Open\(/);
    const initPanic = await start();
    fs.copyFileSync(built.initPanic, path.join(initPanic.hostDirs.userfunc, 'deployarchive'));
    // The function's init runs in the exec'd program: its panic ends the worker, and the error says so with its output.
    await rejectsWith(initPanic.specialize({ filepath: deployarchive(initPanic) }, 20_000), /^worker exited during specialization \(exit code 2\): panic: init boom/);
    assert.equal(initPanic.isAlive(), false);
    const none = await start();
    await rejectsWith(none.specialize({ filepath: '/userfunc/none' }, 20_000), /^\/userfunc\/none: not found$/);
  });

  it('stays generic when the exec fails, and still stops at once', async () => {
    const w = await start();
    // A function executable for another machine: its build settings read as Flint's, execve refuses it.
    const foreign = Buffer.from(fs.readFileSync(built.single));
    foreign.writeUInt16LE(0xb7, 18); // e_machine: AArch64
    fs.writeFileSync(path.join(w.hostDirs.userfunc, 'deployarchive'), foreign, { mode: 0o755 });
    await rejectsWith(w.specialize({ filepath: deployarchive(w) }, 20_000), /^error specializing function: cannot start \/.*deployarchive: exec format error$/);
    fs.rmSync(path.join(w.hostDirs.userfunc, 'deployarchive'));
    fs.copyFileSync(built.single, path.join(w.hostDirs.userfunc, 'deployarchive'));
    await w.specialize({ filepath: deployarchive(w) }, 20_000);
    assert.equal((await call(w)).text, 'single file');
    // The failed hand-over left the worker's socket as it was: it stops without waiting out its grace.
    const g = await start();
    fs.writeFileSync(path.join(g.hostDirs.userfunc, 'deployarchive'), foreign, { mode: 0o755 });
    await rejectsWith(g.specialize({ filepath: deployarchive(g) }, 20_000), /exec format error/);
    const t0 = Date.now();
    await g.kill();
    assert.ok(Date.now() - t0 < 2500, 'a generic worker whose exec failed exits at once');
  });

  it('refuses an executable built for another hand-over, a non-executable file and a NUL in the entrypoint', async () => {
    const w = await start();
    fs.copyFileSync(otherHandoff, path.join(w.hostDirs.userfunc, 'deployarchive'));
    await rejectsWith(w.specialize({ filepath: deployarchive(w) }, 20_000), /was built for another version of Flint's Go runtime: build the package again/);
    const m = await start();
    fs.writeFileSync(path.join(m.hostDirs.userfunc, 'deployarchive'), fs.readFileSync(built.single), { mode: 0o644 });
    await rejectsWith(m.specialize({ filepath: deployarchive(m) }, 20_000), /deployarchive is not executable \(mode -rw-r--r--\)/);
    const n = await start();
    fs.copyFileSync(built.single, path.join(n.hostDirs.userfunc, 'deployarchive'));
    await rejectsWith(n.specialize({ filepath: deployarchive(n), functionName: 'Hand\u0000ler' }, 20_000), /functionName must not contain a NUL character/);
    await n.specialize({ filepath: deployarchive(n) }, 20_000);
    assert.equal((await call(n)).text, 'single file', 'still generic after the refusals');
  });

  it("keeps the worker's options whatever the function's env says", async () => {
    // Each would change how the exec'd program listens, stops or limits its memory, if it read them.
    const env = { FLINT_PORT: 'x', FLINT_EXIT_ON_STDIN_EOF: '0', FLINT_SHUTDOWN_GRACE_MS: '60000', GOMEMLIMIT: '1MiB', FLINT_DEBUG: '1' };
    const w = await start();
    fs.copyFileSync(built.multi, path.join(w.hostDirs.userfunc, 'deployarchive'));
    await w.specialize({ filepath: deployarchive(w), functionName: 'MemLimit', env }, 20_000);
    assert.equal((await call(w)).text, String(w.limits.heapMB * 1024 * 1024));
    const t0 = Date.now();
    await w.kill();
    assert.ok(Date.now() - t0 < 2500, 'stops at once, as the worker was told to');
  });

  it('stays generic after a bad request or a missing path', async () => {
    const w = await start();
    const notJson = await unixRequest(w.socketPath, 'POST', '/v2/specialize', { body: 'not an object', timeoutMs: 10_000 });
    assert.equal(notJson.status, 400);
    assert.match(JSON.parse(notJson.text).error, /not valid JSON/);
    const noPath = await unixRequest(w.socketPath, 'POST', '/v2/specialize', { body: { functionName: 'Handler' }, timeoutMs: 10_000 });
    assert.deepEqual([noPath.status, JSON.parse(noPath.text).error], [400, 'filepath is required']);
    const missing = await unixRequest(w.socketPath, 'POST', '/v2/specialize', { body: { filepath: deployarchive(w) }, timeoutMs: 10_000 });
    assert.equal(missing.status, 404);
    fs.copyFileSync(built.multi, path.join(w.hostDirs.userfunc, 'deployarchive'));
    await w.specialize({ filepath: deployarchive(w), functionName: 'HandlerFuncVar' }, 20_000);
    assert.equal((await call(w)).text, 'handlerfunc');
  });

  it('answers a panic with 500 and logs it; the worker keeps serving', async () => {
    const w = await deploy(built.multi, 'Panics');
    for (let i = 0; i < 2; i++) {
      const r = await call(w);
      assert.equal(r.status, 500);
      assert.deepEqual(JSON.parse(r.text), { error: 'Internal server error' });
    }
    // The worker's output reaches the log on its own time (through the spawner), not before the answer.
    await eventually(() => lines.some((l) => l.includes('panic in function: boom from go')), 'the panic in the log');
    await eventually(() => lines.some((l) => l.includes('.Panics(')), 'the stack, naming the function, in the log');
    // With the router's request id, every line of the panic carries it.
    const marked = await new Promise<number>((resolve, reject) => {
      const req = http.request({ socketPath: w.socketPath, path: '/', headers: { 'x-flint-request-id': 'go-req-1' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(marked, 500);
    for (let i = 0; i < 100 && !lines.some((l) => l.startsWith('\x1ego-req-1\x1e')); i++) await new Promise((r) => setTimeout(r, 20));
    const tagged = () => lines.filter((l) => l.startsWith('\x1ego-req-1\x1e'));
    assert.equal(tagged()[0], '\x1ego-req-1\x1epanic in function: boom from go');
    await eventually(() => tagged().some((l) => l.includes('.Panics(')), 'the tagged stack naming the function');
    assert.equal(w.isAlive(), true);
    // Once the response has started, the connection is cut instead.
    const late = await deploy(built.multi, 'PanicsLate');
    await assert.rejects(call(late));
    await eventually(() => lines.some((l) => l.includes('panic in function: late boom')), 'the late panic in the log');
    assert.equal((await call(w)).status, 500);
  });

  it('stops on SIGTERM', async () => {
    const w = await deploy(built.single);
    const t0 = Date.now();
    await w.kill();
    const exit = await w.exited;
    assert.ok(Date.now() - t0 < 2500, 'an idle worker exits at once');
    if (sandbox === 'none') assert.deepEqual(exit, { code: 0, signal: null }, 'a graceful exit');
  });
});
