// The real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl) as one binary built from
// the small Go module in tools/kube. A cold build takes minutes and gigabytes,
// so the binary is kept in the user's cache directory under a hash of that
// module's files: a fresh clone on the same machine builds nothing, and a
// changed go.mod or main.go builds a new one. $FLINT_KUBE_BIN names a binary
// built elsewhere.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const REPO = path.resolve(import.meta.dirname, '..', '..');
export const KUBE_MODULE_DIR = path.join(REPO, 'tools', 'kube');
/** The version every component reports; kubectl refuses a server whose version does not parse. */
export const KUBE_VERSION = 'v1.34.4';
const MODULE_FILES = ['go.mod', 'go.sum', 'main.go'];

/** The Go toolchain: on the PATH, else /usr/local/go's. */
export function goBinary(): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (!dir) continue;
    const p = path.join(dir, 'go');
    if (fs.existsSync(p)) return p;
  }
  if (fs.existsSync('/usr/local/go/bin/go')) return '/usr/local/go/bin/go';
  throw new Error('Go is needed to build the Kubernetes control plane (tools/kube): install Go 1.24 or later, or set FLINT_KUBE_BIN');
}

/** The hash of the module's files: the cache key. */
export function kubeModuleHash(): string {
  const h = createHash('sha256');
  for (const f of MODULE_FILES) h.update(f).update('\0').update(fs.readFileSync(path.join(KUBE_MODULE_DIR, f))).update('\0');
  return h.digest('hex').slice(0, 16);
}

function cacheRoot(): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'flint', 'kube');
}

/** Where the binary is (or will be) for the module as it is now. */
export function kubeBinaryPath(): string {
  return process.env.FLINT_KUBE_BIN || path.join(cacheRoot(), kubeModuleHash(), 'kube');
}

/** The binary's path, built first when the cache has none for this module. */
export function ensureKube(log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): string {
  const bin = kubeBinaryPath();
  if (fs.existsSync(bin)) return bin;
  if (process.env.FLINT_KUBE_BIN) throw new Error(`FLINT_KUBE_BIN names ${bin}, which does not exist`);
  const go = goBinary();
  const [major, minor] = KUBE_VERSION.slice(1).split('.');
  const stamp = [
    `-X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}`,
    `-X k8s.io/component-base/version.gitMajor=${major}`,
    `-X k8s.io/component-base/version.gitMinor=${minor}`,
    `-X k8s.io/client-go/pkg/version.gitVersion=${KUBE_VERSION}`,
    `-X k8s.io/client-go/pkg/version.gitMajor=${major}`,
    `-X k8s.io/client-go/pkg/version.gitMinor=${minor}`,
    '-X k8s.io/component-base/version.gitTreeState=clean',
  ].join(' ');
  fs.mkdirSync(path.dirname(bin), { recursive: true });
  // Built beside its final name and renamed: an interrupted build leaves no binary that looks whole.
  const partial = `${bin}.partial-${process.pid}`;
  const started = Date.now();
  log(`building the Kubernetes control plane ${KUBE_VERSION} (tools/kube) into ${bin}: several minutes on a cold Go cache, once per machine`);
  execFileSync(go, ['build', '-p', String(Math.max(1, Math.min(os.availableParallelism(), 4))), '-trimpath', '-ldflags', `-s -w ${stamp}`, '-o', partial, '.'], {
    cwd: KUBE_MODULE_DIR,
    env: { ...process.env, GOFLAGS: '-mod=mod', CGO_ENABLED: '0' },
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 60 * 60_000,
  });
  fs.renameSync(partial, bin);
  log(`built in ${Math.round((Date.now() - started) / 1000)} s`);
  return bin;
}

if (import.meta.main) {
  process.stdout.write(`${ensureKube()}\n`);
}
