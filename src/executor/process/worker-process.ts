// One worker process: a runtime server started generic in its sandbox,
// probed until it answers /healthz on its Unix socket, specialized once,
// killed when the executor is done with it.
//
//   const w = await startWorker({ id, runtime: 'node', instanceDir, sandbox: 'bubblewrap',
//                                 allowNetwork: false, memoryMB: 256, onOutput });
//   // fill w.hostDirs.userfunc / secrets / configs, then:
//   await w.specialize({ filepath: `${w.sandboxDirs.userfunc}/deployarchive`, functionName }, 30_000);
//   // proxy requests to w.socketPath ... then:
//   await w.kill();
//
// The worker owns `instanceDir` (userfunc/, secrets/, configs/, usually sock/,
// and unsandboxed tmp/ and package.json); the caller removes it after
// `exited`. Sandboxed workers share one read-only .sandbox-etc/ beside it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FlintError } from '../../api/errors.ts';
import { mkdirUnder } from '../../fsafe/mkdir.ts';
import { unsafePath, writeFileNoFollow } from '../../fsafe/open.ts';
import type { RuntimeName } from '../../api/images.ts';
import { type RuntimeLaunch, runtimeLaunch } from '../../runtimes/index.ts';
import { SANDBOX_PATHS, SANDBOX_UID, sandboxAvailable, sandboxBinaryPath, sandboxCommand } from '../../sandbox/bwrap.ts';
import { createWorkerCgroups, type WorkerCgroups } from '../../sandbox/cgroup.ts';
import { onCpus } from '../../sandbox/cpu-affinity.ts';
import type { EgressNamespace, EgressProvider } from '../../sandbox/egress.ts';
import { withLimits } from '../../sandbox/limits.ts';
import { LineSplitter, Tail } from '../../sandbox/lines.ts';
import { spawnProcess } from '../../sandbox/spawner.ts';
import { ControlChannel, TimeoutError } from './unix-http.ts';

export { sandboxAvailable };

export interface WorkerOptions {
  /** Instance id: [a-z0-9-], at most 63 characters; names the cgroups and the sandbox's hostname. */
  id: string;
  runtime: RuntimeName;
  /** Host directory owned by this worker (created if missing). */
  instanceDir: string;
  sandbox: 'bubblewrap' | 'none';
  /**
   * false: the worker gets its own network namespace with only a loopback
   * device. true: a namespace of its own from `egress`, routed to the world
   * but not to the host (unsandboxed workers share the host's network, as
   * they share everything else).
   */
  allowNetwork: boolean;
  /** Makes the namespaces of workers with network; without one such a worker fails to start. */
  egress?: EgressProvider;
  /** Memory limit of the whole worker (cgroup, where available) and basis of the heap cap. */
  memoryMB: number;
  /** CPU seconds the worker may use over its whole life (RLIMIT_CPU); unset: no cap. */
  cpuSeconds?: number;
  /** Extra environment for the runtime (the environment's runtime env). */
  env?: Record<string, string>;
  /** Every output line of the worker, stdout and stderr: the function's log. */
  onOutput(line: string, stream: 'stdout' | 'stderr'): void;
  /** How long the worker may take to answer its health probe (default 15 s). */
  startTimeoutMs?: number;
  /** Started at nice 10 (a warm worker, started in the background); specialize() puts it back to 0. */
  background?: boolean;
  /** Have the runtime warm its loaders and request path before it is ready (default true); false for a worker a request is already waiting for. */
  warmUp?: boolean;
  /** Between asking the worker to stop and SIGKILL in kill(), and the runtime's own grace (default 3 s). */
  killGraceMs?: number;
  /** CPU cap in thousandths of a core, through a cgroup where one can be made; unset: no cap. */
  cpuMillis?: number;
  /** Use cgroups for memory and pid caps when this machine allows (default true). */
  cgroups?: boolean;
  /** The CPUs the worker runs on, as taskset writes them, checked by cpuListProblem ('' or unset: the scheduler's choice). */
  cpus?: string;
}

export interface WorkerDirs {
  userfunc: string;
  secrets: string;
  configs: string;
}

export interface SpecializeRequest {
  /** Path of the code as the worker sees it (under sandboxDirs.userfunc). */
  filepath: string;
  functionName?: string;
  /** Merged into the worker's process.env before the code loads. */
  env?: Record<string, string>;
}

export interface WorkerExit {
  code: number | null;
  signal: string | null;
}

/** Which caps are actually enforced on this worker. */
export interface WorkerLimits {
  memoryCgroup: boolean;
  pidsCgroup: boolean;
  /** A CPU cap was asked for and a cgroup holds it. */
  cpuCgroup: boolean;
  heapMB: number;
  cpuSeconds?: number;
}

export interface WorkerHandle {
  readonly id: string;
  readonly pid: number;
  /** Host path of the Unix socket the worker serves HTTP on. */
  readonly socketPath: string;
  /** Where the executor writes code, secrets and configmaps before specializing. */
  readonly hostDirs: WorkerDirs;
  /** The same directories as the worker sees them (/userfunc, /secrets, /configs in the sandbox). */
  readonly sandboxDirs: WorkerDirs;
  readonly limits: WorkerLimits;
  /** Resolves when the worker has exited and its output has been delivered. Never rejects. */
  readonly exited: Promise<WorkerExit>;
  isAlive(): boolean;
  /** Rejects with FLINT_ERR_SPECIALIZE_FAILED carrying the runtime's message, on failure or timeout. */
  specialize(req: SpecializeRequest, timeoutMs: number): Promise<void>;
  /** SIGTERM, SIGKILL after the grace period; resolves once exited. */
  kill(graceMs?: number): Promise<void>;
}

const SOCKET_NAME = 'w.sock';
const DEFAULT_KILL_GRACE_MS = 3000;
// sun_path holds 108 bytes with its NUL; keep a margin.
const MAX_SOCKET_PATH = 100;
const MIB = 1024 * 1024;
// Node itself needs about this much to start; a smaller cgroup would only OOM-kill it at boot.
const MIN_CGROUP_MB = 64;
const PIDS_MAX = 512;

function socketFitsIn(instanceDir: string): boolean {
  return Buffer.byteLength(path.join(instanceDir, 'sock', SOCKET_NAME)) <= MAX_SOCKET_PATH;
}

/** A directory for the socket outside a data directory too deep to bind a Unix socket in. */
function temporarySocketDir(): { dir: string; temporary: boolean } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-s-'));
  if (Buffer.byteLength(path.join(dir, SOCKET_NAME)) > MAX_SOCKET_PATH) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new FlintError('FLINT_ERR_CONFIG', `the temporary directory ${os.tmpdir()} is too deep for a Unix socket path; set TMPDIR to a shorter one`);
  }
  return { dir, temporary: true };
}

/**
 * Makes an instance's directory and its `children`; returns whether the directory was made anew. An instance's id is
 * new, so its directory normally does not exist: made with a plain mkdir, which fails on anything already there (a
 * link included), it holds nothing but what is made in it next, and the children need no checks. Each check was a
 * system call on the server's event loop, about twenty a start. In one that exists (an id used before, whose function
 * wrote its tmp/ and may have left links there) each child is checked instead, following no link.
 */
function makeInstanceDirs(instanceDir: string, children: string[]): boolean {
  try {
    fs.mkdirSync(instanceDir, 0o755);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EEXIST' && code !== 'ENOENT') throw err;
    for (const c of children) mkdirUnder(instanceDir, c);
    return false;
  }
  for (const c of children) fs.mkdirSync(path.join(instanceDir, c), 0o755);
  return true;
}

const identityFiles = new Map<string, { passwd: string; group: string; inodes: [number, number] }>();
const uid = process.getuid?.();

/** The inode of `file` if it is a regular file of ours with one name, as this server wrote it; else undefined. */
function ownFileInode(file: string): number | undefined {
  const st = fs.lstatSync(file, { throwIfNoEntry: false });
  if (!st?.isFile() || st.nlink !== 1 || (uid !== undefined && st.uid !== uid)) return undefined;
  return st.ino;
}

/**
 * The sandbox's /etc/passwd and /etc/group, which name its one user: the same
 * for every worker, so written once per directory of instance directories
 * and bound read-only into each sandbox, rather than a directory and two
 * files per worker, each a blocking write on the server's loop in a cold
 * start. Before each use both must still be the files written (same inode,
 * a regular file of ours, one link); else they are written again, each to a
 * new file renamed into place, which replaces a planted link rather than
 * writing through it and never truncates a file a running sandbox has bound.
 */
function sandboxIdentity(instancesDir: string): { passwd: string; group: string } {
  const known = identityFiles.get(instancesDir);
  if (known && ownFileInode(known.passwd) === known.inodes[0] && ownFileInode(known.group) === known.inodes[1]) return known;
  const etc = mkdirUnder(instancesDir, '.sandbox-etc');
  const files = { passwd: path.join(etc, 'passwd'), group: path.join(etc, 'group') };
  const write = (file: string, text: string): number => {
    const fresh = `${file}.${process.pid}.new`;
    fs.rmSync(fresh, { force: true });
    writeFileNoFollow(fresh, text, 'create');
    fs.renameSync(fresh, file);
    const ino = ownFileInode(file);
    if (ino === undefined) throw unsafePath(file, 'it changed while it was written');
    return ino;
  };
  const inodes: [number, number] = [
    write(files.passwd, `nobody:x:${SANDBOX_UID}:${SANDBOX_UID}:nobody:/tmp:/usr/sbin/nologin\n`),
    write(files.group, `nogroup:x:${SANDBOX_UID}:\n`),
  ];
  identityFiles.set(instancesDir, { ...files, inodes });
  return files;
}

// Workers of this process that have not exited yet. Should this process exit
// first (a worker still starting when the server stopped, say), they would
// die anyway with their parent, but their cgroups would be left behind.
const running = new Set<{ killNow(): void; cg: WorkerCgroups | undefined }>();
let exitHook = false;
function track(w: { killNow(): void; cg: WorkerCgroups | undefined }): () => void {
  if (!exitHook) {
    exitHook = true;
    process.once('exit', () => {
      for (const r of running) r.killNow();
      for (const r of running) r.cg?.removeSync(500);
    });
  }
  running.add(w);
  return () => running.delete(w);
}

function describeExit(e: WorkerExit): string {
  return e.signal ? `killed by ${e.signal}` : `exit code ${e.code}`;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Changes in the worker's socket directory (inotify), so the health probe
 * runs as soon as the runtime binds its socket instead of at the next step
 * of a backoff: up to tens of milliseconds of every cold start that finds
 * no warm worker. `next()` resolves at the next change after the call; where
 * the directory cannot be watched it never does, and the backoff alone paces
 * the probe.
 */
function socketAppearance(dir: string): { watching: boolean; next(): Promise<void>; close(): void } {
  let wake: (() => void) | undefined;
  // A change while no probe waited: the next wait ends at once.
  let missed = false;
  let watcher: fs.FSWatcher | undefined;
  try {
    watcher = fs.watch(dir, { persistent: false }, () => {
      if (wake) wake();
      else missed = true;
      wake = undefined;
    });
    watcher.on('error', () => watcher?.close());
  } catch {
    // e.g. out of inotify watches: the backoff still finds the socket.
  }
  return {
    watching: watcher !== undefined,
    next: () => {
      if (!watcher) return new Promise<void>(() => {});
      if (missed) {
        missed = false;
        return Promise.resolve();
      }
      return new Promise<void>((r) => (wake = r));
    },
    close: () => watcher?.close(),
  };
}

function validate(opts: WorkerOptions): RuntimeLaunch {
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(opts.id)) {
    throw new FlintError('FLINT_ERR_VALIDATION', `worker id '${opts.id}' must be 1-63 characters of [a-z0-9-]`);
  }
  if (!Number.isInteger(opts.memoryMB) || opts.memoryMB < 1) {
    throw new FlintError('FLINT_ERR_VALIDATION', `memoryMB must be a positive integer, got ${opts.memoryMB}`);
  }
  if (opts.cpuSeconds !== undefined && (!Number.isInteger(opts.cpuSeconds) || opts.cpuSeconds < 1)) {
    throw new FlintError('FLINT_ERR_VALIDATION', `cpuSeconds must be a positive integer, got ${opts.cpuSeconds}`);
  }
  const rt = runtimeLaunch(opts.runtime);
  if (!rt) throw new FlintError('FLINT_ERR_UNAVAILABLE', `the ${opts.runtime} runtime is not available in local mode yet`);
  return rt;
}

export async function startWorker(opts: WorkerOptions): Promise<WorkerHandle> {
  const rt = validate(opts);
  await rt.prepare?.();
  const sandboxed = opts.sandbox === 'bubblewrap';
  const instanceDir = path.resolve(opts.instanceDir);
  const hostDirs: WorkerDirs = {
    userfunc: path.join(instanceDir, 'userfunc'),
    secrets: path.join(instanceDir, 'secrets'),
    configs: path.join(instanceDir, 'configs'),
  };
  const hostTmp = path.join(instanceDir, 'tmp');
  const cg = opts.cgroups === false ? undefined : createWorkerCgroups(opts.id, { memoryBytes: Math.max(opts.memoryMB, MIN_CGROUP_MB) * MIB, pidsMax: PIDS_MAX, cpuMillis: opts.cpuMillis });
  const dropCgroups = () => void cg?.remove();
  let identity: { passwd: string; group: string } | undefined;
  let sock: { dir: string; temporary: boolean };
  try {
    // In the sandbox /tmp is a tmpfs of its own, so the host's tmp/ is made only for an unsandboxed worker.
    const children = [...Object.values(hostDirs), ...(sandboxed ? [] : [hostTmp])].map((d) => path.basename(d));
    const sockInside = socketFitsIn(instanceDir);
    if (sockInside) children.push('sock');
    const fresh = makeInstanceDirs(instanceDir, children);
    identity = sandboxed ? sandboxIdentity(path.dirname(instanceDir)) : undefined;
    sock = sockInside ? { dir: path.join(instanceDir, 'sock'), temporary: false } : temporarySocketDir();
    if (!fresh) fs.rmSync(path.join(sock.dir, SOCKET_NAME), { force: true });
    if (!sandboxed) {
      // Module format is decided by the nearest package.json above the code; a
      // data directory inside some "type": "module" project would turn the
      // function's CommonJS into ESM. A neutral one here stops that search.
      writeFileNoFollow(path.join(instanceDir, 'package.json'), '{}\n', 'replace');
    }
  } catch (err) {
    dropCgroups();
    throw err;
  }
  const socketPath = path.join(sock.dir, SOCKET_NAME);
  const sandboxDirs: WorkerDirs = sandboxed
    ? { userfunc: SANDBOX_PATHS.userfunc, secrets: SANDBOX_PATHS.secrets, configs: SANDBOX_PATHS.configs }
    : { ...hostDirs };

  let netns: EgressNamespace | undefined;
  if (sandboxed && opts.allowNetwork) {
    try {
      if (!opts.egress) throw new FlintError('FLINT_ERR_NETWORK_UNAVAILABLE', 'external network was asked for, but this executor has no way to give a sandbox a network of its own');
      netns = await opts.egress.create();
    } catch (err) {
      if (sock.temporary) fs.rmSync(sock.dir, { recursive: true, force: true });
      dropCgroups();
      throw err;
    }
  }

  // With the cgroup holding the total, the heap gets three quarters so that a
  // heap-hungry function fails with V8's own message in its log rather than a
  // silent kernel kill; without a cgroup the heap cap is all there is.
  const heapMB = cg?.memory ? Math.max(16, Math.floor((opts.memoryMB * 3) / 4)) : opts.memoryMB;
  const limits: WorkerLimits = { memoryCgroup: cg?.memory ?? false, pidsCgroup: cg?.pids ?? false, cpuCgroup: cg?.cpu ?? false, heapMB, cpuSeconds: opts.cpuSeconds };

  const tmp = sandboxed ? SANDBOX_PATHS.tmp : hostTmp;
  const env: Record<string, string> = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C.UTF-8',
    NODE_ENV: 'production',
    HOME: tmp,
    TMPDIR: tmp,
    ...opts.env,
    FLINT_INSTANCE_ID: opts.id,
    FLINT_SOCKET: sandboxed ? path.posix.join(SANDBOX_PATHS.sock, SOCKET_NAME) : socketPath,
    FLINT_USERFUNC_DIR: sandboxDirs.userfunc,
    FLINT_SECRETS_DIR: sandboxDirs.secrets,
    FLINT_CONFIGS_DIR: sandboxDirs.configs,
    // The worker exits when its stdin closes, i.e. when this process dies.
    FLINT_EXIT_ON_STDIN_EOF: '1',
    // Asked to stop, the runtime lets requests in flight run as long as kill() waits for it.
    FLINT_SHUTDOWN_GRACE_MS: String(opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS),
    ...(opts.warmUp === false ? { FLINT_WARM_UP: '0' } : {}),
  };

  let argv: string[];
  if (sandboxed) {
    const command = rt.command(SANDBOX_PATHS.runtime, heapMB, sandboxBinaryPath);
    argv = sandboxCommand(
      {
        binds: [
          { host: rt.dir, at: SANDBOX_PATHS.runtime },
          ...(rt.binds?.(SANDBOX_PATHS.runtime) ?? []),
          { host: hostDirs.userfunc, at: SANDBOX_PATHS.userfunc },
          { host: hostDirs.secrets, at: SANDBOX_PATHS.secrets },
          { host: hostDirs.configs, at: SANDBOX_PATHS.configs },
          { host: sock.dir, at: SANDBOX_PATHS.sock, writable: true },
        ],
        binaries: rt.binaries(),
        passwd: identity,
        network: netns && { netnsPath: netns.path, resolvConf: netns.resolvConf },
        tmpSizeBytes: Math.max(opts.memoryMB, MIN_CGROUP_MB) * MIB,
        hostname: opts.id,
      },
      command,
    );
  } else {
    argv = rt.command(rt.dir, heapMB, (p) => p);
  }
  argv = withLimits(argv, cg, opts.cpuSeconds);
  if (opts.background && RENICE !== undefined) argv = ['nice', '-n', '10', ...argv];
  argv = onCpus(opts.cpus ?? '', argv);

  // Its own process group, so kill() reaches whatever the function started too. Started by the spawner
  // process, not forked from this one (spawner.ts says why). Nobody writes to the worker's stdin: it tells
  // the worker the server is alive, and its end asks it to stop. A command that cannot start (an env value
  // with a NUL byte, say) is an 'error' event, after which finish() leaves nothing behind.
  const child = spawnProcess(argv, { env, cwd: sandboxed ? '/' : hostTmp });

  const tail = new Tail();
  const emit = (line: string, stream: 'stdout' | 'stderr') => {
    if (stream === 'stderr') tail.push(line);
    try {
      opts.onOutput(line, stream);
    } catch {
      // a failing log sink must not take the executor down
    }
  };
  for (const stream of ['stdout', 'stderr'] as const) {
    const splitter = new LineSplitter((line) => emit(line, stream));
    child[stream]!.on('data', (c: Buffer) => splitter.write(c));
    child[stream]!.on('end', () => splitter.end());
  }

  let alive = true;
  let spawnError: Error | undefined;
  const signalGroup = (sig: NodeJS.Signals) => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      try {
        process.kill(child.pid, sig);
      } catch {}
    }
  };
  const untrack = track({ killNow: () => signalGroup('SIGKILL'), cg });
  const exited = new Promise<WorkerExit>((resolve) => {
    let result: WorkerExit | undefined;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      alive = false;
      if (sock.temporary) fs.rmSync(sock.dir, { recursive: true, force: true });
      else fs.rmSync(socketPath, { force: true });
      const done = () => {
        untrack();
        resolve(result ?? { code: null, signal: null });
      };
      // The namespace outlives the worker only until its last process is gone.
      void Promise.all([cg?.remove(), netns?.release()]).then(done, done);
    };
    child.once('exit', (code, signal) => {
      alive = false;
      result = { code, signal };
      // Leftovers of the function (unsandboxed) would hold the output pipes open.
      signalGroup('SIGKILL');
      setTimeout(finish, 2000).unref();
    });
    child.once('close', finish);
    child.once('error', (err) => {
      spawnError = err;
      if (child.pid === undefined) finish();
    });
  });

  let killing: Promise<void> | undefined;
  const kill = (graceMs?: number): Promise<void> => {
    // A stuck worker (a timed-out request) gets no grace: it could not act on SIGTERM anyway.
    if (graceMs === 0 && alive) signalGroup('SIGKILL');
    killing ??= (async () => {
      if (alive) {
        // In the sandbox the runtime is in a session of its own
        // (--new-session), out of reach of the group's SIGTERM, which would
        // end bubblewrap at once and the runtime with it (--die-with-parent)
        // before it could finish its requests or tell its WebSockets (1001).
        // Every runtime takes the end of its stdin as a request to stop.
        if (sandboxed) child.stdin.end();
        else signalGroup('SIGTERM');
        const t = setTimeout(() => signalGroup('SIGKILL'), graceMs ?? opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS);
        await exited;
        clearTimeout(t);
      } else await exited;
    })();
    return killing;
  };

  const control = new ControlChannel(socketPath);
  void exited.then(() => control.close());
  const startTimeout = opts.startTimeoutMs ?? 15_000;
  const deadline = Date.now() + startTimeout;
  let exit: WorkerExit | undefined;
  void exited.then((e) => (exit = e));
  const appeared = socketAppearance(sock.dir);
  try {
    await probeUntilHealthy();
  } finally {
    appeared.close();
  }

  async function probeUntilHealthy(): Promise<void> {
    // Watched, the socket's appearance ends the wait, and the backoff is only a fallback: probing every few
    // milliseconds meanwhile cost the server's loop a failed connect each, four or five a start.
    let delay = appeared.watching ? 50 : 5;
    for (;;) {
      if (!alive || exit) {
        const e = await exited;
        const why = spawnError ? `could not be started: ${spawnError.message}` : `exited before it was ready (${describeExit(e)})`;
        throw new FlintError('FLINT_ERR_UNAVAILABLE', `worker ${opts.id} ${why}: ${tail.text() || 'no output'}`);
      }
      try {
        const r = await control.request('GET', '/healthz', { timeoutMs: 2000 });
        if (r.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await kill();
        throw new FlintError('FLINT_ERR_UNAVAILABLE', `worker ${opts.id} did not answer its health probe within ${startTimeout} ms: ${tail.text() || 'no output'}`);
      }
      // The runtime listens once it is ready: its socket appearing ends the wait at once, the backoff is the fallback.
      // A probe that a change woke and that still failed (bound, not yet listening) is retried soon.
      const woke = await Promise.race([sleep(delay).then(() => false), exited.then(() => false), appeared.next().then(() => true)]);
      delay = woke ? 5 : Math.min(delay * 2, 100);
    }
  }

  return {
    id: opts.id,
    pid: child.pid ?? -1,
    socketPath,
    hostDirs,
    sandboxDirs,
    limits,
    exited,
    isAlive: () => alive,
    async specialize(req, timeoutMs) {
      if (!alive) throw new FlintError('FLINT_ERR_SPECIALIZE_FAILED', `worker ${opts.id} is not running`);
      // Back to the normal priority first: with the cgroup, at once; without, in the background (a cold start should not
      // wait for a process spawn, and without contention the priority makes no difference).
      if (opts.background && child.pid !== undefined) renice(child.pid, cg);
      let r: { status: number; text: string };
      try {
        r = await control.request('POST', '/v2/specialize', { body: req, timeoutMs });
      } catch (err) {
        if (err instanceof TimeoutError) {
          throw new FlintError('FLINT_ERR_SPECIALIZE_FAILED', `specialization did not finish within ${timeoutMs} ms`);
        }
        // A connection cut by a dying worker: say so, with what it printed.
        const e = await Promise.race([exited, sleep(500).then(() => undefined)]);
        throw new FlintError(
          'FLINT_ERR_SPECIALIZE_FAILED',
          e ? `worker exited during specialization (${describeExit(e)}): ${tail.text() || 'no output'}` : `specialization failed: ${(err as Error).message}`,
        );
      }
      if (r.status < 200 || r.status >= 300) {
        let message = r.text.trim();
        try {
          const body = JSON.parse(r.text) as { error?: unknown };
          if (typeof body.error === 'string') message = body.error;
        } catch {}
        throw new FlintError('FLINT_ERR_SPECIALIZE_FAILED', message || `the runtime answered ${r.status}`);
      }
    },
    kill,
  };
}

/**
 * A warm worker starts at nice 10: its start (a node process, about 270 ms of
 * CPU) then yields to the instances serving requests, which on a busy small
 * machine showed as a tail every time a pool refilled (p99 2.2x under steady
 * load with the package replaced every 2 s, 1.7x with this). Specializing it
 * puts every thread of every process of it back to 0, which needs root: the
 * executor asks for it only then, and only where renice exists.
 */
const RENICE = ['/usr/bin/renice', '/bin/renice'].find((p) => fs.existsSync(p));

function renice(rootPid: number, cg: WorkerCgroups | undefined): void {
  if (RENICE === undefined) return;
  // The worker's cgroup lists every thread of it: one small read, done before the specialization is sent, so that
  // the function loads at the normal priority. Found from /proc (the stat of every process on the machine, then a
  // renice process), the priority came back only after the specialization: at nice 10 among a burst's new workers,
  // a warm worker took 65-80 ms to specialize, against 13-16 ms now.
  const tids = cg ? threadsOf(cg) : [];
  if (tids.length > 0) {
    // Nice is per thread on Linux: os.setPriority(tid) reaches that thread alone, as wanted here.
    for (const tid of tids) {
      try {
        os.setPriority(tid, 0);
      } catch {
        // gone meanwhile
      }
    }
    return;
  }
  // The sandbox's inner processes run in a session (and process group) of
  // their own (bwrap --new-session): every group under the worker is reniced,
  // each with all its threads (nice is per thread on Linux; -g reaches them all).
  void processGroupsUnder(rootPid).then((groups) => {
    // From the spawner: a fork of this process would hold up its event loop (spawner.ts).
    if (groups.length > 0) spawnProcess([RENICE, '-n', '0', '-g', ...groups.map(String)], { env: { PATH: '/usr/bin:/bin' }, cwd: '/' }).stdin.end();
  });
}

/** The ids of the threads in the worker's cgroup; none where it cannot be read. */
function threadsOf(cg: WorkerCgroups): number[] {
  try {
    return fs.readFileSync(cg.threadsFile, 'utf8').split('\n').filter((t) => t !== '').map(Number);
  } catch {
    return [];
  }
}

/** The process groups of `rootPid` and of every process under it. */
async function processGroupsUnder(rootPid: number): Promise<number[]> {
  const children = new Map<number, number[]>();
  const groupOf = new Map<number, number>();
  for (const entry of await fs.promises.readdir('/proc').catch(() => [] as string[])) {
    if (entry.charCodeAt(0) > 57) continue;
    try {
      const stat = await fs.promises.readFile(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const pid = Number(entry);
      const ppid = Number(fields[1]);
      groupOf.set(pid, Number(fields[2]));
      const list = children.get(ppid);
      if (list) list.push(pid);
      else children.set(ppid, [pid]);
    } catch {
      // Gone while looking.
    }
  }
  const groups = new Set<number>();
  const stack = [rootPid];
  while (stack.length > 0) {
    const pid = stack.pop() as number;
    const g = groupOf.get(pid);
    if (g !== undefined) groups.add(g);
    for (const c of children.get(pid) ?? []) stack.push(c);
  }
  return [...groups];
}
