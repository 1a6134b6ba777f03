// src/sandbox is a folder DESIGN section 3 does not list: the sandbox began
// inside executor/process, but the builder runs builds in the same sandbox
// and components must not import each other's insides, so it sits beside
// store, auth and archive, below both executor and builder.
//
// The bubblewrap command line for a function's worker or a package's build.
// Inside: the system's /usr read-only, the caller's binds (for a worker: the
// runtime and the packages its launch description names, the function's
// code, secrets and configmaps read-only and a writable socket directory;
// for a build: the source and output writable), a size-capped private /tmp
// and nothing else writable; its own user, pid, ipc, uts, cgroup and network
// namespaces; uid 65534 with no capabilities and no way to create further
// user namespaces. The network namespace is a fresh one with only loopback,
// or, for external network, an egress namespace (egress.ts) that bwrap is
// started inside: never the host's.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { NSENTER } from './egress.ts';

function findBwrap(): string {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/bin', '/bin'])) {
    if (!dir) continue;
    const p = path.join(dir, 'bwrap');
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {}
  }
  return '/usr/bin/bwrap';
}

export const BWRAP = findBwrap();

/** Paths as the worker sees them inside the sandbox. */
export const SANDBOX_PATHS = {
  runtime: '/flint/runtime',
  builder: '/flint/builder',
  buildCache: '/flint/cache',
  packages: '/packages',
  bin: '/flint/bin',
  sock: '/flint/sock',
  userfunc: '/userfunc',
  secrets: '/secrets',
  configs: '/configs',
  tmp: '/tmp',
} as const;

/** The uid and gid the function runs as inside the sandbox (nobody). */
export const SANDBOX_UID = 65534;

/** A host path made visible inside the sandbox. */
export interface SandboxBind {
  host: string;
  /** Path inside the sandbox. */
  at: string;
  /** Read-only unless set. */
  writable?: boolean;
}

export interface SandboxNetwork {
  /** The namespace's file under /run/netns. */
  netnsPath: string;
  /** Host file shown at /etc/resolv.conf. */
  resolvConf: string;
}

export interface SandboxSpec {
  /** What the sandbox sees besides the system (/usr, /bin, /lib...) and a private /tmp. */
  binds: SandboxBind[];
  /** Host files (an interpreter, a toolchain) needed outside /usr, read-only at sandboxBinaryPath(). */
  binaries: string[];
  /** Host files with passwd and group entries for the sandbox user (os.userInfo() needs them). */
  passwd?: { passwd: string; group: string };
  /** External network: the egress namespace to run in (see egress.ts). Unset: loopback only. */
  network?: SandboxNetwork;
  tmpSizeBytes: number;
  hostname: string;
  /** Working directory inside the sandbox (default /tmp). */
  chdir?: string;
}

let systemTops: string[] | undefined;
/**
 * The system's top-level directories as the sandbox shows them. Merged-/usr systems keep /bin, /lib... as links into
 * /usr; older ones as directories. Looked at once per process: they do not change under a running server, and each
 * start looked again (six lstat and four readlink calls on the server's event loop, a burst's worth of them at once).
 */
function systemTopArgs(): string[] {
  if (!systemTops) {
    const a: string[] = [];
    for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
      const st = fs.lstatSync(top, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isSymbolicLink()) a.push('--symlink', fs.readlinkSync(top), top);
      else a.push('--ro-bind', top, top);
    }
    systemTops = a;
  }
  return systemTops;
}

/**
 * Where a host binary appears inside the sandbox. Binaries outside /usr get a
 * fixed path: their host path may lie under /tmp, which the sandbox's own
 * /tmp would hide (a checkout in /tmp runs node from there).
 */
export function sandboxBinaryPath(bin: string): string {
  return bin.startsWith('/usr/') ? bin : `${SANDBOX_PATHS.bin}/${path.basename(bin)}`;
}

/**
 * What TLS clients read to trust servers (Debian's and Red Hat's layouts), and nothing else of /etc/ssl or /etc/pki:
 * their private/ directories hold the host's keys. The sandbox's uid is mapped to the server's, so a host file of
 * root's, even one only its owner may read, is readable inside when the server runs as root: only what may be shown
 * is bound.
 */
const TLS_TRUST = [
  '/etc/ssl/certs',
  '/etc/ssl/openssl.cnf',
  '/etc/ca-certificates',
  '/etc/ca-certificates.conf',
  '/etc/pki/ca-trust',
  '/etc/pki/tls/certs',
  '/etc/pki/tls/cert.pem',
  '/etc/pki/tls/openssl.cnf',
];

/**
 * The host's time zone inside the sandbox. Where the host's /etc/localtime is a link into the zone database under
 * /usr (which the sandbox shows), the sandbox gets the same link: ICU (Node's Intl and Date) takes the zone's name from
 * the link, and given a copy of the file instead it compared that with every file of the database to find the name,
 * about 1,400 files opened and read, 6 ms of CPU on every Node worker's start. Elsewhere, the file itself. Looked at
 * for each sandbox (one readlink), so that a change of the host's zone reaches the next workers as it did before.
 */
function localtimeArgs(): string[] {
  let target: string | undefined;
  try {
    target = path.resolve('/etc', fs.readlinkSync('/etc/localtime'));
    // The link must lead to a file the sandbox sees: one under /usr, followed to its end.
    if (!target.startsWith('/usr/share/zoneinfo/') || !fs.realpathSync(target).startsWith('/usr/') || !fs.statSync(target).isFile()) target = undefined;
  } catch {
    // not a link, or none, or dangling
    target = undefined;
  }
  return target ? ['--symlink', target, '/etc/localtime'] : ['--ro-bind-try', '/etc/localtime', '/etc/localtime'];
}

/**
 * bwrap arguments for `command`. The environment is not on this command line
 * (other users can read a process's argv): bwrap passes its own environment
 * through, so the caller spawns it with exactly the worker's env.
 */
export function bwrapArgs(spec: SandboxSpec, command: string[]): string[] {
  const a: string[] = [
    '--unshare-all',
    '--unshare-user',
    '--disable-userns',
    '--uid', String(SANDBOX_UID),
    '--gid', String(SANDBOX_UID),
    '--cap-drop', 'ALL',
    '--die-with-parent',
    '--new-session',
    '--hostname', spec.hostname,
    '--ro-bind', '/usr', '/usr',
  ];
  // --unshare-all made a fresh network namespace; with external network the
  // one to keep is the egress namespace sandboxCommand() starts bwrap in.
  if (spec.network) a.push('--share-net');
  a.push(...systemTopArgs());
  a.push(...localtimeArgs());
  const etc = ['/etc/hosts'];
  if (spec.network) etc.push('/etc/nsswitch.conf', '/etc/gai.conf', '/etc/host.conf', ...TLS_TRUST);
  for (const p of etc) a.push('--ro-bind-try', p, p);
  if (spec.network) a.push('--ro-bind-try', spec.network.resolvConf, '/etc/resolv.conf');
  if (spec.passwd) a.push('--ro-bind', spec.passwd.passwd, '/etc/passwd', '--ro-bind', spec.passwd.group, '/etc/group');
  for (const bin of spec.binaries) {
    if (!bin.startsWith('/usr/')) a.push('--ro-bind', bin, sandboxBinaryPath(bin));
  }
  for (const b of spec.binds) a.push(b.writable ? '--bind' : '--ro-bind', b.host, b.at);
  a.push(
    '--proc', '/proc',
    '--dev', '/dev',
    '--size', String(spec.tmpSizeBytes),
    '--tmpfs', SANDBOX_PATHS.tmp,
    // The root bwrap builds is a writable tmpfs until told otherwise.
    '--remount-ro', '/',
    '--chdir', spec.chdir ?? SANDBOX_PATHS.tmp,
    '--',
    ...command,
  );
  return a;
}

/**
 * The whole command line of a sandbox: bwrap, entered into its egress
 * namespace first when it has one (nsenter execs bwrap, so the caller's
 * pid, process group and signals are bwrap's as without it).
 */
export function sandboxCommand(spec: SandboxSpec, command: string[]): string[] {
  const argv = [BWRAP, ...bwrapArgs(spec, command)];
  return spec.network ? [NSENTER, `--net=${spec.network.netnsPath}`, '--', ...argv] : argv;
}

let available: Promise<boolean> | undefined;

/** Whether bubblewrap can build the sandbox workers use on this machine (checked once). */
export function sandboxAvailable(): Promise<boolean> {
  available ??= new Promise((resolve) => {
    let dir: string;
    try {
      dir = fs.mkdtempSync(path.join(fs.realpathSync(process.env.TMPDIR || '/tmp'), 'flint-bwrap-check-'));
    } catch {
      resolve(false);
      return;
    }
    const args = bwrapArgs(
      { binds: [{ host: dir, at: SANDBOX_PATHS.runtime }, { host: dir, at: SANDBOX_PATHS.sock, writable: true }], binaries: [], tmpSizeBytes: 1 << 20, hostname: 'flint' },
      ['/bin/sh', '-c', 'exit 0'],
    );
    execFile(BWRAP, args, { timeout: 10_000 }, (err) => {
      fs.rmSync(dir, { recursive: true, force: true });
      resolve(!err);
    });
  });
  return available;
}
