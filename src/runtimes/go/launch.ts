// The Go runtime: a generic worker (server/, a stdlib-only Go program) and a
// builder (builder/build) that compiles a package's source, with the same
// server sources, into an executable; the worker specializes by exec'ing it.
//
// The worker also loads packages built before that: Go plugins, Fission's
// form. A plugin loads only into a program built by the same Go toolchain
// with the same flags ("plugin was built with a different version of package
// ..."), so the server cannot ship as a binary: prepare() compiles it on this
// machine, with the toolchain and the flags the builder used, into a cache
// directory keyed by the toolchain's version and the server's sources.
//
// Both find the toolchain the same way: `go` on PATH, else /usr/local/go/bin/go.
// Builds run in a sandbox that sees only /usr of the host (the worker needs
// only its binary, which is bound on its own), so the toolchain must live
// under /usr. A GOROOT elsewhere would have to be bound into the build
// sandbox as a directory, which BuilderLaunch.binaries() (files) does not
// promise; prepare() refuses such a toolchain with a clear message instead.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FlintError } from '../../api/errors.ts';
import type { BuilderLaunch, RuntimeLaunch } from '../launch.ts';

const SERVER_DIR = path.join(import.meta.dirname, 'server');
const BUILDER_DIR = path.join(import.meta.dirname, 'builder');
const BINARY_NAME = 'flint-go-runtime';
const FALLBACK_GO = '/usr/local/go/bin/go';
const MIN_GO_MINOR = 21;
const BUILD_TIMEOUT_MS = 10 * 60_000;

/**
 * Flags of the server's build and of every function's (builder/build passes
 * the same, with GOTOOLCHAIN=local, GOFLAGS empty and GOENV=off). The
 * server's CGO_ENABLED=1 and these flags are what plugins were built with.
 */
export const GO_BUILD_FLAGS: readonly string[] = ['-trimpath', '-buildvcs=false'];

/** Go settings of the host the builder passes on (module proxies, private modules). */
const BUILDER_PASSTHROUGH = ['GOPROXY', 'GOPRIVATE', 'GONOPROXY', 'GONOSUMDB', 'GOSUMDB', 'GOINSECURE', 'GOAUTH'];

const unavailable = (why: string) => new FlintError('FLINT_ERR_UNAVAILABLE', `the go runtime needs the Go toolchain (go 1.${MIN_GO_MINOR} or later) on PATH or in /usr/local/go: ${why}`);

function isExecutableFile(p: string): boolean {
  try {
    if (!fs.statSync(p).isFile()) return false;
    fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The `go` command: the first on `pathEnv`, else /usr/local/go/bin/go; undefined when there is none. */
export function findGo(pathEnv: string | undefined = process.env.PATH, fallback: string = FALLBACK_GO): string | undefined {
  for (const dir of (pathEnv ?? '').split(':')) {
    if (!dir || !path.isAbsolute(dir)) continue;
    const p = path.join(dir, 'go');
    if (isExecutableFile(p)) return p;
  }
  return isExecutableFile(fallback) ? fallback : undefined;
}

/** The minor version in `go version` output (`go version go1.26.8 linux/amd64` -> 26), or undefined. */
export function parseGoMinor(versionOutput: string): number | undefined {
  const m = /\bgo1\.(\d+)/.exec(versionOutput);
  return m ? Number(m[1]) : undefined;
}

interface GoLocation {
  /** The go binary, symlinks resolved. */
  go: string;
  /** Its GOROOT (where cmd/go would find it: the parent of bin/ holding pkg/tool), if recognisable. */
  goroot: string | undefined;
}

let location: GoLocation | null | undefined;
/** Where the toolchain is, found once per process (the runtime and the builder must agree). */
function locateGo(): GoLocation | undefined {
  if (location === undefined) {
    const found = findGo();
    if (!found) location = null;
    else {
      const go = fs.realpathSync(found);
      const root = path.dirname(path.dirname(go));
      location = { go, goroot: fs.existsSync(path.join(root, 'pkg', 'tool')) ? root : undefined };
    }
  }
  return location ?? undefined;
}

/** The environment of a `go` command: the host's minus anything that changes what gets built. */
function goEnv(goBin: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(GO|CGO_)/.test(k) && k !== 'GOCACHE') continue;
    if (k === 'CC' || k === 'CXX') continue;
    env[k] = v;
  }
  env.PATH = `${path.dirname(goBin)}:${env.PATH ?? '/usr/bin:/bin'}`;
  Object.assign(env, { GOENV: 'off', GOFLAGS: '', GOTOOLCHAIN: 'local', CGO_ENABLED: '1' });
  // cmd/go puts its cache under $XDG_CACHE_HOME or $HOME, and fails with neither.
  if (!env.GOCACHE && !env.XDG_CACHE_HOME && !env.HOME) env.GOCACHE = path.join(cacheRoot(), 'go-build');
  return env;
}

function run(cmd: string, args: string[], opts: { cwd?: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ ok: boolean; out: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: opts.cwd, env: opts.env, timeout: opts.timeoutMs, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
      const out = `${stdout}${stderr}`.trim();
      resolve({ ok: !err, out: err && !out ? err.message : out });
    });
  });
}

/** `$XDG_CACHE_HOME/flint/go-runtime`, else `~/.cache/flint/go-runtime`. */
function cacheRoot(): string {
  const xdg = process.env.XDG_CACHE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.cache');
  return path.join(base, 'flint', 'go-runtime');
}

/** The server's files (relative path and content), in a stable order. */
function sourceFiles(dir: string, rel = ''): Array<{ name: string; data: Buffer }> {
  const out: Array<{ name: string; data: Buffer }> = [];
  const entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const name = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...sourceFiles(dir, name));
    else if (e.isFile()) out.push({ name, data: fs.readFileSync(path.join(dir, name)) });
  }
  return out;
}

/** The cache key of a server binary: the toolchain (`go version` output and GOROOT), the flags, the sources. */
export function serverCacheKey(goVersion: string, goroot: string, dir: string = SERVER_DIR): string {
  const h = createHash('sha256');
  h.update(`${goVersion.trim()}\0${goroot}\0${GO_BUILD_FLAGS.join(' ')}\0`);
  for (const f of sourceFiles(dir)) {
    h.update(`${f.name}\0${f.data.length}\0`);
    h.update(f.data);
  }
  return h.digest('hex').slice(0, 20);
}

interface Toolchain {
  go: string;
  goroot: string;
  version: string;
}

async function toolchain(): Promise<Toolchain> {
  const loc = locateGo();
  if (!loc) throw unavailable(`no 'go' on PATH (${process.env.PATH ?? ''}) and no ${FALLBACK_GO}`);
  const env = goEnv(loc.go);
  const v = await run(loc.go, ['version'], { env, timeoutMs: 60_000 });
  if (!v.ok) throw unavailable(`${loc.go} version failed: ${v.out}`);
  const minor = parseGoMinor(v.out);
  if (minor === undefined || minor < MIN_GO_MINOR) throw unavailable(`${loc.go} is ${v.out}`);
  const r = await run(loc.go, ['env', 'GOROOT'], { env, timeoutMs: 60_000 });
  if (!r.ok || !r.out) throw unavailable(`${loc.go} env GOROOT failed: ${r.out}`);
  const goroot = fs.realpathSync(r.out);
  if (!goroot.startsWith('/usr/')) {
    throw new FlintError(
      'FLINT_ERR_UNAVAILABLE',
      `the go runtime needs its Go toolchain under /usr, where sandboxed builds can see it; ${loc.go} has GOROOT ${goroot}: install Go under /usr/local/go (or link it there: a symlink out of /usr does not count)`,
    );
  }
  return { go: loc.go, goroot, version: v.out.split('\n')[0] };
}

/** Compiles the server unless this toolchain has built these sources already; resolves to the binary. */
async function buildServer(): Promise<string> {
  const tc = await toolchain();
  const dir = path.join(cacheRoot(), serverCacheKey(tc.version, tc.goroot));
  const bin = path.join(dir, BINARY_NAME);
  if (isExecutableFile(bin)) return bin;
  try {
    fs.mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new FlintError('FLINT_ERR_UNAVAILABLE', `the go runtime cannot create its cache directory ${dir}: ${(err as Error).message}`);
  }
  // Built under a temporary name and renamed: a crash or a concurrent build
  // never leaves a half-written binary under the final name.
  const tmp = path.join(dir, `.${BINARY_NAME}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const r = await run(tc.go, ['build', ...GO_BUILD_FLAGS, '-o', tmp, '.'], { cwd: SERVER_DIR, env: goEnv(tc.go), timeoutMs: BUILD_TIMEOUT_MS });
  if (!r.ok) {
    fs.rmSync(tmp, { force: true });
    throw new FlintError('FLINT_ERR_UNAVAILABLE', `the go runtime server did not build with ${tc.version}: ${r.out}`);
  }
  fs.renameSync(tmp, bin);
  return bin;
}

let serverBinary: string | undefined;
let preparing: Promise<void> | undefined;

function prepare(): Promise<void> {
  preparing ??= buildServer().then(
    (bin) => {
      serverBinary = bin;
    },
    (err: unknown) => {
      // Not memoized: a toolchain installed later is found by the next worker.
      preparing = undefined;
      throw err;
    },
  );
  return preparing;
}

function binary(): string {
  if (!serverBinary) throw new FlintError('FLINT_ERR_UNAVAILABLE', 'the go runtime server has not been built: prepare() must finish first');
  return serverBinary;
}

/** Where a sandboxed build finds the server's sources, which it compiles into every function. */
const RUNTIME_SOURCES_IN_SANDBOX = '/flint/go-runtime-src';

const goBuilder: BuilderLaunch = {
  dir: BUILDER_DIR,
  sources: () => [{ host: SERVER_DIR, at: RUNTIME_SOURCES_IN_SANDBOX, env: 'FLINT_GO_RUNTIME_SRC' }],
  // The toolchain lives under /usr (prepare() insists), which every sandbox sees.
  binaries: () => [],
  env: () => {
    const loc = locateGo();
    const env: Record<string, string> = {};
    if (loc) {
      env.FLINT_GO = loc.go;
      if (loc.goroot) env.GOROOT = loc.goroot;
    }
    for (const k of BUILDER_PASSTHROUGH) {
      const v = process.env[k];
      if (v) env[k] = v;
    }
    return env;
  },
  path: () => {
    const loc = locateGo();
    return loc ? [path.dirname(loc.go)] : [];
  },
};

export const goLaunch: RuntimeLaunch = {
  dir: SERVER_DIR,
  prepare,
  binaries: () => [binary()],
  // GOMEMLIMIT from the worker's heap budget: a soft limit the Go garbage
  // collector works to stay under (the cgroup, where there is one, is the hard cap).
  command: (_runtimeDir, heapMB, bin) => [bin(binary()), `--memlimit-mb=${heapMB}`],
  builder: goBuilder,
};
