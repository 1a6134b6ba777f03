// The bubblewrap command line for one worker: no network unless allowed,
// the system read-only, the function's code, secrets and configs read-only,
// a private /tmp, and only the socket directory writable.
import { execFile } from 'node:child_process';
import fs from 'node:fs';

export const BWRAP = '/usr/bin/bwrap';

/** Paths the worker sees inside the sandbox. */
export const SANDBOX_PATHS = {
  runtime: '/flint/runtime',
  node: '/flint/node',
  userfunc: '/userfunc',
  secrets: '/secrets',
  configs: '/configs',
  sock: '/sock',
} as const;

export interface SandboxSpec {
  nodeBinary: string;
  runtimeDir: string;
  userfunc: string;
  secrets: string;
  configs: string;
  sockDir: string;
  allowNetwork: boolean;
  env: Record<string, string>;
}

function roBindIfExists(args: string[], p: string): void {
  if (fs.existsSync(p)) args.push('--ro-bind', p, p);
}

export function bwrapArgs(spec: SandboxSpec, command: string[]): string[] {
  const args = [
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--clearenv',
    '--ro-bind', '/usr', '/usr',
    '--proc', '/proc',
    '--dev', '/dev',
    '--tmpfs', '/tmp',
    '--ro-bind', spec.nodeBinary, SANDBOX_PATHS.node,
    '--ro-bind', spec.runtimeDir, SANDBOX_PATHS.runtime,
    '--ro-bind', spec.userfunc, SANDBOX_PATHS.userfunc,
    '--ro-bind', spec.secrets, SANDBOX_PATHS.secrets,
    '--ro-bind', spec.configs, SANDBOX_PATHS.configs,
    '--bind', spec.sockDir, SANDBOX_PATHS.sock,
    '--chdir', '/tmp',
  ];
  // Debian keeps /lib, /lib64 and /bin as links into /usr.
  for (const link of ['/lib', '/lib64', '/bin', '/sbin']) {
    if (!fs.existsSync(link)) continue;
    const st = fs.lstatSync(link);
    if (st.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(link), link);
    else args.push('--ro-bind', link, link);
  }
  if (spec.allowNetwork) {
    args.push('--share-net');
    for (const p of ['/etc/resolv.conf', '/etc/hosts', '/etc/nsswitch.conf', '/etc/ssl', '/etc/ca-certificates']) roBindIfExists(args, p);
  }
  for (const [k, v] of Object.entries(spec.env)) args.push('--setenv', k, v);
  return [...args, '--', ...command];
}

let available: Promise<boolean> | undefined;

/** Whether bubblewrap can start a sandbox on this machine (checked once). */
export function sandboxAvailable(): Promise<boolean> {
  available ??= new Promise((resolve) => {
    if (!fs.existsSync(BWRAP)) return resolve(false);
    execFile(BWRAP, bwrapProbeArgs(), (err) => resolve(!err));
  });
  return available;
}

function bwrapProbeArgs(): string[] {
  const args = ['--unshare-all', '--ro-bind', '/usr', '/usr'];
  for (const link of ['/lib', '/lib64', '/bin']) {
    if (!fs.existsSync(link)) continue;
    if (fs.lstatSync(link).isSymbolicLink()) args.push('--symlink', fs.readlinkSync(link), link);
    else args.push('--ro-bind', link, link);
  }
  return [...args, '--', '/usr/bin/true'];
}
