// Per-worker resource caps through cgroups, when this machine lets us create
// them (root with a writable cgroup v1 hierarchy, or a delegated cgroup v2
// subtree). Anything less and the worker runs without them: the heap cap and
// the sandbox still apply. A worker joins its cgroups through the launch
// wrapper (see limits.ts) before it execs, so every process it starts is
// inside from its first instruction.
//
// Made synchronously: making and setting a worker's cgroups takes about 0.1 ms
// of the thread (measured on cgroup v1, memory and pids), while the promise
// API took five or six trips through the event loop, and in a burst of cold
// starts each trip waited behind the burst's requests: 46-53 ms of the first
// wave's start. Removal (which waits for the kernel) and the sweep of
// leftovers stay asynchronous.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';

const ROOT = '/sys/fs/cgroup';

export interface CgroupLimits {
  memoryBytes: number;
  pidsMax: number;
  /** CPU time per wall-clock time, in thousandths of a core (resources.limits.cpu: 500m = half a core); unset: no cap. */
  cpuMillis?: number;
}

/** The scheduler period the CPU quota is a share of (the kernel's default). */
const CPU_PERIOD_US = 100_000;
const cpuQuotaUs = (millis: number) => Math.max(1000, Math.round((millis / 1000) * CPU_PERIOD_US));

export interface WorkerCgroups {
  /** cgroup.procs files the worker writes its pid into. */
  readonly procsFiles: string[];
  /** A file listing the id of every thread of every process of the worker (v1 `tasks`, v2 `cgroup.threads`). */
  readonly threadsFile: string;
  readonly memory: boolean;
  readonly pids: boolean;
  /** Whether a CPU cap was asked for and set. */
  readonly cpu: boolean;
  /** Removes the cgroups; call once the worker's processes are gone. */
  remove(): Promise<void>;
  /** The same, blocking for at most `waitMs`: for a process that is exiting. */
  removeSync(waitMs: number): void;
}

let own: Map<string, string> | undefined;
/** Our own cgroup path per v1 controller ('' key: the v2 unified path); read once, as this process does not move. */
function ownCgroups(): Map<string, string> {
  own ??= readOwnCgroups();
  return own;
}

function readOwnCgroups(): Map<string, string> {
  const out = new Map<string, string>();
  let text: string;
  try {
    text = fs.readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return out;
  }
  for (const line of text.split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    for (const controller of m[1].split(',')) out.set(controller, m[2]);
  }
  return out;
}

function tryWrite(file: string, value: string): boolean {
  try {
    fs.writeFileSync(file, value);
    return true;
  } catch {
    return false;
  }
}

/** A child of our own cgroup under `mount`, or of the mount root when our path is not visible there. */
function makeChild(mount: string, own: string | undefined, name: string): string | undefined {
  const parents = [own ? path.join(mount, own) : undefined, mount].filter((p): p is string => p !== undefined);
  for (const parent of parents) {
    const dir = path.join(parent, name);
    void sweep(parent, name);
    try {
      fs.mkdirSync(dir);
      return dir;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        // Left by a worker of a server that was killed: reuse it.
        return dir;
      }
    }
  }
  return undefined;
}

// A worker cgroup with no process left that is older than this is a leftover
// of a server that exited before it could remove it (killed, or exiting while
// a worker was still starting). Young ones may be one another server is
// just setting up.
const STALE_MS = 60_000;
const lastSweep = new Map<string, number>();

/** Removes leftover, empty `flint-*` cgroups under `parent`, at most once a minute. */
async function sweep(parent: string, keep: string): Promise<void> {
  const now = Date.now();
  if (now - (lastSweep.get(parent) ?? 0) < STALE_MS) return;
  lastSweep.set(parent, now);
  let names: string[];
  try {
    names = (await fsp.readdir(parent)).filter((n) => n.startsWith('flint-') && n !== keep);
  } catch {
    return;
  }
  for (const name of names) {
    const dir = path.join(parent, name);
    try {
      if (now - (await fsp.stat(dir)).mtimeMs < STALE_MS) continue;
      if ((await fsp.readFile(path.join(dir, 'cgroup.procs'), 'utf8')).trim() !== '') continue;
      await fsp.rmdir(dir);
    } catch {
      // in use, or gone already
    }
  }
}

function rmdirQuiet(dir: string): void {
  try {
    fs.rmdirSync(dir);
  } catch {}
}

/** Removes what it can; returns the cgroups still busy (their tasks not yet reaped). */
function removeOnce(dirs: string[]): string[] {
  return dirs.filter((d) => {
    try {
      fs.rmdirSync(d);
      return false;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EBUSY';
    }
  });
}

/** removeOnce without holding the event loop. */
async function removeOnceAsync(dirs: string[]): Promise<string[]> {
  const busy = await Promise.all(
    dirs.map((d) =>
      fsp.rmdir(d).then(
        () => false,
        (err: NodeJS.ErrnoException) => err.code === 'EBUSY',
      ),
    ),
  );
  return dirs.filter((_, i) => busy[i]);
}

async function removeDirs(dirs: string[]): Promise<void> {
  // The kernel frees a cgroup only after its last task is reaped, which can
  // trail the worker's exit by a moment.
  for (let attempt = 0; attempt < 40 && dirs.length > 0; attempt++) {
    dirs = await removeOnceAsync(dirs);
    if (dirs.length > 0) await new Promise((r) => setTimeout(r, 50));
  }
}

function removeDirsSync(dirs: string[], waitMs: number): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + waitMs;
  for (;;) {
    dirs = removeOnce(dirs);
    if (dirs.length === 0 || Date.now() >= deadline) return;
    Atomics.wait(pause, 0, 0, 10);
  }
}

function handle(dirs: string[], procsFiles: string[], threadsFile: string, memory: boolean, pids: boolean, cpu: boolean): WorkerCgroups {
  return {
    procsFiles,
    threadsFile,
    memory,
    pids,
    cpu,
    remove: () => removeDirs(dirs),
    removeSync: (waitMs) => removeDirsSync(dirs, waitMs),
  };
}

/** One v1 controller's child cgroup with its settings written, or undefined where it cannot be made or set. */
function v1Child(controller: string, probe: string, own: Map<string, string>, name: string, settings: Array<[string, string]>): string | undefined {
  const mount = path.join(ROOT, controller);
  if (!fs.existsSync(path.join(mount, probe))) return undefined;
  const dir = makeChild(mount, own.get(controller), name);
  if (!dir) return undefined;
  for (const [file, value] of settings) {
    if (!tryWrite(path.join(dir, file), value)) {
      rmdirQuiet(dir);
      return undefined;
    }
  }
  return dir;
}

function v1(name: string, limits: CgroupLimits, own: Map<string, string>): WorkerCgroups | undefined {
  const memoryDir = v1Child('memory', 'memory.limit_in_bytes', own, name, [['memory.limit_in_bytes', String(limits.memoryBytes)]]);
  const pidsDir = v1Child('pids', 'cgroup.procs', own, name, [['pids.max', String(limits.pidsMax)]]);
  const cpuDir =
    limits.cpuMillis === undefined
      ? undefined
      : v1Child('cpu', 'cpu.cfs_quota_us', own, name, [
          ['cpu.cfs_period_us', String(CPU_PERIOD_US)],
          ['cpu.cfs_quota_us', String(cpuQuotaUs(limits.cpuMillis))],
        ]);
  // With swap accounting, also cap memory+swap, or the limit only moves pages to swap.
  if (memoryDir) tryWrite(path.join(memoryDir, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
  const dirs = [memoryDir, pidsDir, cpuDir].filter((d): d is string => d !== undefined);
  if (dirs.length === 0) return undefined;
  return handle(dirs, dirs.map((d) => path.join(d, 'cgroup.procs')), path.join(dirs[0], 'tasks'), memoryDir !== undefined, pidsDir !== undefined, cpuDir !== undefined);
}

function v2(name: string, limits: CgroupLimits, own: Map<string, string>): WorkerCgroups | undefined {
  const controllers = (() => {
    try {
      return fs.readFileSync(path.join(ROOT, 'cgroup.controllers'), 'utf8');
    } catch {
      return '';
    }
  })();
  if (!controllers.includes('memory')) return undefined;
  const dir = makeChild(ROOT, own.get(''), name);
  if (!dir) return undefined;
  // Works only where the parent delegates the controllers to its children.
  const memory = tryWrite(path.join(dir, 'memory.max'), String(limits.memoryBytes));
  if (memory) tryWrite(path.join(dir, 'memory.swap.max'), '0');
  const pids = tryWrite(path.join(dir, 'pids.max'), String(limits.pidsMax));
  const cpu = limits.cpuMillis !== undefined && tryWrite(path.join(dir, 'cpu.max'), `${cpuQuotaUs(limits.cpuMillis)} ${CPU_PERIOD_US}`);
  if (!memory && !pids && !cpu) {
    rmdirQuiet(dir);
    return undefined;
  }
  return handle([dir], [path.join(dir, 'cgroup.procs')], path.join(dir, 'cgroup.threads'), memory, pids, cpu);
}

/** Cgroups named `flint-<name>` with the given caps, or undefined where none can be made. */
export function createWorkerCgroups(name: string, limits: CgroupLimits): WorkerCgroups | undefined {
  if (process.platform !== 'linux') return undefined;
  const own = ownCgroups();
  const cgName = `flint-${name}`;
  const pureV2 = fs.existsSync(path.join(ROOT, 'cgroup.controllers'));
  return pureV2 ? v2(cgName, limits, own) : v1(cgName, limits, own);
}
