// Real worker processes: unsandboxed always, bubblewrap where it works here.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { isFlintError } from '../../api/errors.ts';
import { sandboxAvailable } from '../../sandbox/bwrap.ts';
import { EgressNetworks, egressUnavailableReason } from '../../sandbox/egress.ts';
import { unixRequest } from './unix-http.ts';
import { startWorker, type WorkerHandle, type WorkerOptions } from './worker-process.ts';
import { eventually } from '../../testing/eventually.ts';
import { descendants } from '../../testing/process-tree.ts';

let root: string;
const workers: WorkerHandle[] = [];
let seq = 0;

before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-wp-'));
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

interface Started {
  w: WorkerHandle;
  lines: Array<{ line: string; stream: string }>;
}

async function start(opts: Partial<WorkerOptions> = {}): Promise<Started> {
  const lines: Array<{ line: string; stream: string }> = [];
  const id = `w${++seq}-${process.pid}`;
  const w = await startWorker({
    id,
    runtime: 'node',
    instanceDir: path.join(root, id),
    sandbox: 'none',
    allowNetwork: false,
    memoryMB: 128,
    onOutput: (line, stream) => lines.push({ line, stream }),
    ...opts,
  });
  workers.push(w);
  return { w, lines };
}

async function deploy(w: WorkerHandle, code: string, extra: { functionName?: string; env?: Record<string, string> } = {}): Promise<void> {
  fs.writeFileSync(path.join(w.hostDirs.userfunc, 'deployarchive'), code, { mode: 0o444 });
  await w.specialize({ filepath: path.posix.join(w.sandboxDirs.userfunc, 'deployarchive'), ...extra }, 10_000);
}

const call = (w: WorkerHandle, urlPath = '/') => unixRequest(w.socketPath, 'GET', urlPath, { timeoutMs: 20_000 });


/** Directories named `name` in the cgroup hierarchies (a few levels deep). */
function findCgroups(name: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      if (e.name === name) found.push(path.join(dir, e.name));
      else if (depth < 4) walk(path.join(dir, e.name), depth + 1);
    }
  };
  walk('/sys/fs/cgroup', 0);
  return found;
}

/**
 * Starts a worker from a separate process, ends that process (SIGKILL, or an
 * exit with the worker still running), and waits for the worker to go.
 */
async function outlivesNoParent(sandbox: 'none' | 'bubblewrap', how: 'SIGKILL' | 'exit' = 'SIGKILL'): Promise<void> {
  const id = `orphan-${sandbox}-${how.toLowerCase()}-${process.pid}`;
  const script = path.join(root, `${id}.mts`);
  fs.writeFileSync(
    script,
    `import { startWorker } from ${JSON.stringify(pathToFileURL(path.join(import.meta.dirname, 'worker-process.ts')).href)};
const w = await startWorker({ id: '${id}', runtime: 'node', instanceDir: ${JSON.stringify(path.join(root, id))},
  sandbox: '${sandbox}', allowNetwork: false, memoryMB: 128, cgroups: ${how === 'exit'}, onOutput() {} });
console.log(w.pid);
${how === 'exit' ? 'setTimeout(() => process.exit(0), 10);' : 'setInterval(() => {}, 1000);'}
`,
  );
  const parent = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const pid = await new Promise<number>((resolve, reject) => {
    let out = '';
    parent.stdout!.on('data', (c) => {
      out += c;
      if (out.includes('\n')) resolve(Number(out.trim()));
    });
    parent.once('exit', (code) => reject(new Error(`parent exited with ${code} before starting the worker`)));
  });
  assert.ok(pid > 0);
  if (how === 'SIGKILL') parent.kill('SIGKILL');
  else await new Promise((r) => parent.once('exit', r));
  // Gone, or a zombie waiting for init to reap it.
  await eventually(() => {
    try {
      return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').startsWith('Z');
    } catch {
      return true;
    }
  }, 'the orphaned worker to exit');
  if (how === 'exit') assert.deepEqual(findCgroups(`flint-${id}`), [], 'an exiting parent removes its workers\' cgroups');
}

async function rejectsWith(p: Promise<unknown>, code: string, message: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isFlintError(err), `expected a FlintError, got ${String(err)}`);
    assert.equal(err.code, code);
    assert.match(err.message, message);
    return true;
  });
}

const CRASHER = 'module.exports = async (c) => { if (c.request.path === "/crash") { setImmediate(() => process.exit(9)); return new Promise(() => {}); } return { body: "up" }; };';


/** The nice value of every thread of `root` and of every process under it (field 19 of each task's stat). */
function treeNiceness(root: number): number[] {
  const out: number[] = [];
  for (const pid of [root, ...descendants(root)]) {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      out.push(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    }
  }
  return out;
}

describe('worker process (unsandboxed)', () => {
  it('starts generic, specializes, serves on its socket and is killed', async () => {
    const { w, lines } = await start({ env: { FROM_ENV: 'runtime-env' } });
    assert.equal(w.isAlive(), true);
    assert.deepEqual(w.sandboxDirs, w.hostDirs);
    assert.equal((await call(w)).status, 503, 'generic until specialized');
    await deploy(w, 'module.exports = async () => { console.log("hello-log"); console.error("oops-log"); return { body: { a: process.env.FROM_ENV, b: process.env.FROM_SPEC } }; };', {
      env: { FROM_SPEC: 'spec-env' },
    });
    const r = await call(w, '/x');
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.text), { a: 'runtime-env', b: 'spec-env' });
    await eventually(() => lines.some((l) => l.stream === 'stdout' && l.line === 'hello-log'), 'stdout line');
    await eventually(() => lines.some((l) => l.stream === 'stderr' && l.line === 'oops-log'), 'stderr line');
    await w.kill();
    const exit = await w.exited;
    assert.ok(exit.code !== null || exit.signal !== null);
    assert.equal(w.isAlive(), false);
    assert.equal(fs.existsSync(w.socketPath), false, 'the socket is removed');
  });

  // With cgroups the threads are found in the worker's cgroup; without, by walking /proc from the worker's pid.
  for (const cgroups of [true, false]) {
    it(`starts a background (warm) worker at nice 10 and puts every thread of every process of it back to 0 when it is specialized (unsandboxed, cgroups ${cgroups ? 'on' : 'off'})`, { skip: process.getuid?.() !== 0 && 'raising a priority needs root' }, async (t) => {
      const { w } = await start({ background: true, cgroups });
      if (cgroups && !w.limits.memoryCgroup && !w.limits.pidsCgroup) return t.skip('this machine gives a worker no cgroup');
      await eventually(() => treeNiceness(w.pid).length > 2, 'the worker and its threads');
      assert.ok(treeNiceness(w.pid).every((n) => n === 10), `started at 10: ${treeNiceness(w.pid)}`);
      await deploy(w, 'module.exports = async () => ({ body: "ok" });');
      await eventually(() => treeNiceness(w.pid).every((n) => n === 0), 'every thread back to 0');
      assert.equal((await call(w)).status, 200);
    });
  }

  it('reports a load failure and a specialization timeout as FLINT_ERR_SPECIALIZE_FAILED', async () => {
    const { w } = await start();
    await rejectsWith(deploy(w, 'module.exports = async (context => {\n'), 'FLINT_ERR_SPECIALIZE_FAILED', /SyntaxError/);
    const slow = (await start()).w;
    fs.writeFileSync(path.join(slow.hostDirs.userfunc, 'deployarchive'), 'await new Promise(() => {}); export default async () => ({});');
    await rejectsWith(slow.specialize({ filepath: path.join(slow.sandboxDirs.userfunc, 'deployarchive') }, 300), 'FLINT_ERR_SPECIALIZE_FAILED', /did not finish/);
  });

  it('rejects with the stderr tail when the worker dies before it is ready', async () => {
    await rejectsWith(start({ env: { NODE_OPTIONS: '--require /nonexistent/preload.cjs' } }), 'FLINT_ERR_UNAVAILABLE', /exited before it was ready[\s\S]*nonexistent/);
  });

  it('refuses an instance directory that exists with a link where one of its directories goes, and writes nothing through it', async () => {
    for (const child of ['userfunc', 'secrets', 'sock']) {
      const id = `w${++seq}-${process.pid}`;
      const instanceDir = path.join(root, id);
      const target = fs.mkdtempSync(path.join(root, 'target-'));
      fs.mkdirSync(instanceDir);
      fs.symlinkSync(target, path.join(instanceDir, child));
      await assert.rejects(start({ id, instanceDir }), { code: 'FLINT_ERR_UNSAFE_PATH' }, child);
      assert.deepEqual(fs.readdirSync(target), [], child);
    }
  });

  it('starts in an instance directory that exists already (an id used before), its socket left behind removed', async () => {
    const id = `w${++seq}-${process.pid}`;
    const instanceDir = path.join(root, id);
    fs.mkdirSync(path.join(instanceDir, 'sock'), { recursive: true });
    fs.writeFileSync(path.join(instanceDir, 'sock', 'w.sock'), 'left behind');
    const { w } = await start({ id, instanceDir });
    await deploy(w, 'module.exports = async () => ({ body: "ok" });');
    assert.equal((await call(w)).status, 200);
  });

  it('refuses bad options', async () => {
    await rejectsWith(start({ id: 'Bad_Id' } as Partial<WorkerOptions>), 'FLINT_ERR_VALIDATION', /worker id/);
    await rejectsWith(start({ env: { BAD: 'nul\0byte' } }), 'FLINT_ERR_UNAVAILABLE', /could not be started/);
  });

  it('works from an instance directory too deep for a socket path', async () => {
    const deep = path.join(root, 'd'.repeat(60), 'e'.repeat(60));
    const { w } = await start({ instanceDir: deep });
    assert.ok(Buffer.byteLength(w.socketPath) <= 100, w.socketPath);
    await deploy(w, 'module.exports = async () => ({ body: "deep" });');
    assert.equal((await call(w)).text, 'deep');
    await w.kill();
    await w.exited;
    assert.equal(fs.existsSync(path.dirname(w.socketPath)), false, 'the temporary socket directory is removed');
  });

  it('a worker that crashes mid-request fails the request and resolves exited', async () => {
    const { w } = await start();
    await deploy(w, CRASHER);
    assert.equal((await call(w)).text, 'up');
    await assert.rejects(call(w, '/crash'));
    assert.deepEqual(await w.exited, { code: 9, signal: null });
    assert.equal(w.isAlive(), false);
  });

  it('exits when the process that started it dies', async () => {
    await outlivesNoParent('none');
  });

  it('is killed, and its cgroups removed, when the process that started it exits', async () => {
    await outlivesNoParent('none', 'exit');
  });

  it('kill gives the function its grace period after SIGTERM, and kill(0) none', async () => {
    // A function that keeps running on SIGTERM (the runtime's own handler is replaced).
    const stubborn = 'process.removeAllListeners("SIGTERM"); process.on("SIGTERM", () => console.log("got SIGTERM, finishing up")); module.exports = async () => ({ body: "ok" });';
    const { w: graceful, lines } = await start({ killGraceMs: 400 });
    await deploy(graceful, stubborn);
    await graceful.kill();
    assert.ok(lines.some((l) => l.line.includes('got SIGTERM, finishing up')), 'SIGTERM came first');
    assert.equal((await graceful.exited).signal, 'SIGKILL', 'then SIGKILL, once the grace period ran out');

    const { w: stuck, lines: stuckLines } = await start({ killGraceMs: 600_000 });
    await deploy(stuck, stubborn);
    await stuck.kill(0);
    assert.equal((await stuck.exited).signal, 'SIGKILL');
    assert.ok(!stuckLines.some((l) => l.line.includes('got SIGTERM')), 'no SIGTERM, no ten-minute wait');
  });

  it('caps CPU with a cgroup where one can be made (resources.limits.cpu)', async (t) => {
    const { w } = await start({ cpuMillis: 250 });
    if (!w.limits.cpuCgroup) {
      t.skip('no writable cpu cgroup on this machine');
      return;
    }
    const dirs = findCgroups(`flint-${w.id}`);
    const quota = dirs
      .map((d) => [path.join(d, 'cpu.cfs_quota_us'), path.join(d, 'cpu.max')].find((f) => fs.existsSync(f)))
      .filter((f): f is string => f !== undefined)
      .map((f) => fs.readFileSync(f, 'utf8').trim());
    assert.ok(quota.includes('25000') || quota.includes('25000 100000'), `a quarter of a core: ${JSON.stringify(quota)}`);
    const pids = dirs.flatMap((d) => fs.readFileSync(path.join(d, 'cgroup.procs'), 'utf8').trim().split('\n'));
    assert.ok(pids.includes(String(w.pid)), 'the worker is inside');
  });

  it('enforces a CPU-seconds cap', async () => {
    const { w } = await start({ cpuSeconds: 1 });
    assert.equal(w.limits.cpuSeconds, 1);
    await deploy(w, 'module.exports = async () => { for (;;) {} };');
    await assert.rejects(call(w));
    const exit = await w.exited;
    assert.ok(exit.signal === 'SIGXCPU' || exit.signal === 'SIGKILL', `exit ${JSON.stringify(exit)}`);
  });
});

const PROBE = `
const fs = require('node:fs');
const net = require('node:net');
const attempt = (f) => { try { const v = f(); return v === undefined ? 'ok' : v; } catch (e) { return e.code || e.message; } };
module.exports = async (context) => {
  const q = context.request.query;
  const r = {};
  if (q.port) {
    r.connect = await new Promise((resolve) => {
      const s = net.connect(Number(q.port), '127.0.0.1');
      s.on('connect', () => { s.destroy(); resolve('connected'); });
      s.on('error', (e) => resolve(e.code));
    });
  }
  r.writeUserfunc = attempt(() => fs.writeFileSync('/userfunc/new-file', 'x'));
  r.writeSecrets = attempt(() => fs.writeFileSync('/secrets/new-file', 'x'));
  r.writeRoot = attempt(() => fs.writeFileSync('/new-file', 'x'));
  r.writeUsr = attempt(() => fs.writeFileSync('/usr/new-file', 'x'));
  r.writeTmp = attempt(() => fs.writeFileSync('/tmp/own-file', 'x'));
  r.tmp = fs.readdirSync('/tmp');
  r.secret = attempt(() => fs.readFileSync('/secrets/default/creds/token', 'utf8'));
  r.config = attempt(() => fs.readFileSync('/configs/default/settings/color', 'utf8'));
  r.hostFile = attempt(() => fs.readFileSync(q.hostFile, 'utf8'));
  r.uid = process.getuid();
  r.user = attempt(() => require('node:os').userInfo().username);
  r.processes = fs.readdirSync('/proc').filter((d) => /^[0-9]+$/.test(d)).length;
  r.spawnUserns = attempt(() => require('node:child_process').execFileSync('/usr/bin/unshare', ['-U', 'true'], { stdio: 'pipe' }).toString());
  r.writeLocaltime = attempt(() => fs.writeFileSync('/etc/localtime', 'x'));
  r.localtimeLink = attempt(() => fs.readlinkSync('/etc/localtime'));
  r.timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  r.offset = new Date(Date.UTC(2026, 0, 15)).getTimezoneOffset();
  return { body: r };
};`;

describe('worker process (bubblewrap)', async () => {
  const usable = await sandboxAvailable();
  const skip = usable ? false : 'bubblewrap cannot build a sandbox on this machine (missing, or user namespaces are disabled)';
  const egressSkip = egressUnavailableReason() ?? false;
  let server: net.Server;
  let port = 0;
  let hostDir = '';

  before(async () => {
    // A loopback TCP service on the host: reachable only with allowNetwork.
    server = net.createServer((s) => {
      s.on('error', () => {});
      s.end('hi');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as net.AddressInfo).port;
    hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-host-only-'));
    fs.writeFileSync(path.join(hostDir, 'visible'), 'host data');
  });
  after(async () => {
    server.close();
    fs.rmSync(hostDir, { recursive: true, force: true });
  });

  const probe = async (w: WorkerHandle) => {
    const r = await call(w, `/?port=${port}&hostFile=${encodeURIComponent(path.join(hostDir, 'visible'))}`);
    assert.equal(r.status, 200, r.text);
    return JSON.parse(r.text);
  };

  const slow = {
    node: 'module.exports = async () => { console.log("started"); await new Promise((r) => setTimeout(r, 500)); return { body: "finished" }; };',
    python: 'import time\ndef main():\n    print("started", flush=True)\n    time.sleep(1.5)\n    return "finished"\n',
  } as const;
  for (const runtime of ['node', 'python'] as const) {
    it(`kill stops a sandboxed ${runtime} runtime gracefully: a request in flight finishes, and it exits on its own`, { skip }, async () => {
      const { w, lines } = await start({ sandbox: 'bubblewrap', runtime, killGraceMs: 10_000 });
      await deploy(w, slow[runtime]);
      const inFlight = call(w);
      await eventually(() => lines.some((l) => l.line === 'started'), 'the request to be under way');
      const killed = w.kill();
      const r = await inFlight;
      assert.equal(r.status, 200, r.text);
      assert.equal(r.text, 'finished');
      await killed;
      assert.deepEqual(await w.exited, { code: 0, signal: null }, 'it exited by itself, not by the SIGKILL after the grace period');
    });
  }

  it('starts a background (warm) worker at nice 10 and puts every thread of every process of it back to 0 when it is specialized (sandboxed: bwrap puts the runtime in a session of its own)', { skip: skip || (process.getuid?.() !== 0 && 'raising a priority needs root') }, async () => {
    const { w } = await start({ background: true, sandbox: 'bubblewrap' });
    await eventually(() => treeNiceness(w.pid).length > 2, 'the worker and its threads');
    assert.ok(treeNiceness(w.pid).every((n) => n === 10), `started at 10: ${treeNiceness(w.pid)}`);
    await deploy(w, 'module.exports = async () => ({ body: "ok" });');
    await eventually(() => treeNiceness(w.pid).every((n) => n === 0), 'every thread back to 0');
    assert.equal((await call(w)).status, 200);
  });

  it('isolates the function: no network, read-only code and system, private /tmp, secrets and configs visible', { skip }, async () => {
    const { w } = await start({ sandbox: 'bubblewrap' });
    assert.deepEqual(w.sandboxDirs, { userfunc: '/userfunc', secrets: '/secrets', configs: '/configs' });
    for (const [dir, name, key, value, mode] of [
      [w.hostDirs.secrets, 'creds', 'token', 's3cret', 0o400],
      [w.hostDirs.configs, 'settings', 'color', 'blue', 0o444],
    ] as const) {
      fs.mkdirSync(path.join(dir, 'default', name), { recursive: true });
      fs.writeFileSync(path.join(dir, 'default', name, key), value, { mode });
    }
    await deploy(w, PROBE);
    const r = await probe(w);
    assert.equal(r.connect, 'ECONNREFUSED', 'the host loopback is not reachable');
    assert.equal(r.writeUserfunc, 'EROFS');
    assert.equal(r.writeSecrets, 'EROFS');
    assert.equal(r.writeRoot, 'EROFS');
    assert.equal(r.writeUsr, 'EROFS');
    assert.equal(r.writeTmp, 'ok');
    assert.deepEqual(r.tmp, ['own-file'], '/tmp starts empty and private');
    assert.equal(r.secret, 's3cret');
    assert.equal(r.config, 'blue');
    assert.equal(r.hostFile, 'ENOENT', 'the host file system is not visible');
    assert.equal(r.uid, 65534);
    assert.equal(r.user, 'nobody');
    assert.ok(r.processes <= 3, `sees only its own processes (${r.processes})`);
    assert.notEqual(r.spawnUserns, 'ok', 'cannot create user namespaces');
    // The host's time zone (its /etc/localtime, as a link into /usr's zone database where the host has one), read-only.
    // This process's own zone is the host's unless TZ says otherwise (the worker's environment has no TZ of the server's).
    if (process.env.TZ === undefined) {
      assert.equal(r.timeZone, Intl.DateTimeFormat().resolvedOptions().timeZone);
      assert.equal(r.offset, new Date(Date.UTC(2026, 0, 15)).getTimezoneOffset());
    }
    assert.equal(r.writeLocaltime, 'EROFS');
    const hostLink = (() => {
      try {
        return path.resolve('/etc', fs.readlinkSync('/etc/localtime'));
      } catch {
        return undefined;
      }
    })();
    // A link ICU reads the zone's name from; a copy of the file made it read the whole zone database at every start.
    if (hostLink?.startsWith('/usr/share/zoneinfo/')) assert.equal(r.localtimeLink, hostLink);
    assert.equal(fs.existsSync(path.join(w.hostDirs.userfunc, 'new-file')), false);
  });

  it("never writes the sandbox's shared /etc/passwd and /etc/group through a planted link, before or after they were first written", { skip }, async () => {
    // A directory of instance directories of its own, so that no earlier start has written its identity files.
    const fresh = () => {
      const parent = fs.mkdtempSync(path.join(root, 'etc-'));
      const victim = path.join(parent, 'victim');
      fs.writeFileSync(victim, 'untouched');
      return { parent, victim, etc: path.join(parent, '.sandbox-etc') };
    };
    const startIn = (parent: string) =>
      startWorker({ id: `w${++seq}-${process.pid}`, runtime: 'node', instanceDir: path.join(parent, `i${seq}`), sandbox: 'bubblewrap', allowNetwork: false, memoryMB: 128, onOutput() {} });
    const regularFile = (file: string) => {
      const st = fs.lstatSync(file);
      return st.isFile() && st.nlink === 1;
    };

    // The directory itself planted as a link: refused, and the cgroups made meanwhile are removed.
    const dir = fresh();
    fs.symlinkSync(dir.parent, dir.etc);
    await assert.rejects(startIn(dir.parent), { code: 'FLINT_ERR_UNSAFE_PATH' });
    assert.equal(fs.readFileSync(dir.victim, 'utf8'), 'untouched');
    assert.equal(fs.existsSync(path.join(dir.parent, 'passwd')), false);
    // They are removed in the background: give them time to go.
    await eventually(() => findCgroups(`flint-w${seq}-${process.pid}`).length === 0, "the refused worker's cgroups to be removed");

    // A link, or a second name of another file, in place of passwd before the first start: replaced, not written through.
    for (const plant of [fs.symlinkSync, fs.linkSync]) {
      const f = fresh();
      fs.mkdirSync(f.etc);
      plant(f.victim, path.join(f.etc, 'passwd'));
      const w = await startIn(f.parent);
      workers.push(w);
      assert.equal(fs.readFileSync(f.victim, 'utf8'), 'untouched', plant.name);
      assert.ok(regularFile(path.join(f.etc, 'passwd')), plant.name);
      assert.match(fs.readFileSync(path.join(f.etc, 'passwd'), 'utf8'), /^nobody:x:65534:/);
    }

    // Swapped for a link after a start wrote them: the next start notices and writes them again.
    const later = fresh();
    workers.push(await startIn(later.parent));
    fs.rmSync(path.join(later.etc, 'group'));
    fs.symlinkSync(later.victim, path.join(later.etc, 'group'));
    const w = await startIn(later.parent);
    workers.push(w);
    assert.equal(fs.readFileSync(later.victim, 'utf8'), 'untouched');
    assert.ok(regularFile(path.join(later.etc, 'group')));
    await deploy(w, PROBE);
    assert.equal((await probe(w)).user, 'nobody');
  });

  it('with network allowed but no way to give it a namespace of its own, refuses to start rather than share the host network', { skip }, async () => {
    const id = `w${++seq}-${process.pid}`;
    await assert.rejects(
      startWorker({ id, runtime: 'node', instanceDir: path.join(root, id), sandbox: 'bubblewrap', allowNetwork: true, memoryMB: 128, onOutput() {} }),
      (err) => isFlintError(err) && err.code === 'FLINT_ERR_NETWORK_UNAVAILABLE',
    );
    const unusable = new EgressNetworks({ subnet: '10.231.0.0/16' });
    if (unusable.unavailable) {
      await assert.rejects(
        startWorker({ id: `${id}b`, runtime: 'node', instanceDir: path.join(root, `${id}b`), sandbox: 'bubblewrap', allowNetwork: true, egress: unusable, memoryMB: 128, onOutput() {} }),
        (err) => isFlintError(err) && err.code === 'FLINT_ERR_NETWORK_UNAVAILABLE' && err.message.includes(unusable.unavailable!),
      );
    }
  });

  it('with network allowed, runs in a namespace of its own that cannot reach the host, and removes it on exit', { skip: skip || egressSkip }, async () => {
    const egress = new EgressNetworks({ subnet: '10.231.0.0/16' });
    try {
      const { w } = await start({ sandbox: 'bubblewrap', allowNetwork: true, egress });
      assert.equal(egress.live.length, 1);
      await deploy(w, PROBE);
      assert.notEqual((await probe(w)).connect, 'connected', "the host's loopback service is out of reach");
      await w.kill();
      assert.deepEqual(egress.live, [], 'the namespace went with the worker');
    } finally {
      await egress.stop();
    }
  });

  it('kill stops the sandbox; a crash mid-request fails the request and resolves exited', { skip }, async () => {
    const { w } = await start({ sandbox: 'bubblewrap' });
    await deploy(w, CRASHER);
    assert.equal((await call(w)).text, 'up');
    await assert.rejects(call(w, '/crash'));
    const exit = await w.exited;
    assert.equal(exit.code, 9, 'bubblewrap passes the exit code on');
    assert.equal(w.isAlive(), false);

    const other = (await start({ sandbox: 'bubblewrap' })).w;
    await other.kill();
    await other.exited;
    assert.equal(other.isAlive(), false);
    assert.throws(() => process.kill(other.pid, 0), /ESRCH/);
  });

  it('dies with the process that started it', { skip }, async () => {
    await outlivesNoParent('bubblewrap');
    await outlivesNoParent('bubblewrap', 'exit');
  });

  it('caps memory with a cgroup where one can be made', { skip }, async (t) => {
    const { w, lines } = await start({ sandbox: 'bubblewrap', memoryMB: 96 });
    if (!w.limits.memoryCgroup) {
      t.skip('no writable memory cgroup on this machine');
      return;
    }
    await deploy(w, 'const keep = []; module.exports = async () => { for (let i = 0; i < 64; i++) keep.push(Buffer.alloc(16 * 1024 * 1024, 1)); return { body: "survived" }; };');
    await assert.rejects(call(w), 'allocating 1 GiB in a 96 MB worker does not answer');
    const exit = await w.exited;
    assert.ok(exit.code !== 0, `exit ${JSON.stringify(exit)} ${lines.map((l) => l.line).join('\n')}`);
  });
});
