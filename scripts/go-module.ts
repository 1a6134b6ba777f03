// A small Go module of the repository built once per machine and kept in the
// user's cache directory (~/.cache/flint/<name>/<hash>/<binary>), under a
// hash of the module's files, so a fresh clone on the same machine builds
// nothing and an edited module builds anew.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface GoModule {
  /** The module's directory (with its go.mod). */
  dir: string;
  /** Its files that make the cache key, relative to `dir`. */
  files: string[];
  /** The cache directory's name under ~/.cache/flint. */
  cacheName: string;
  binary: string;
  /** What it is, for the line said before a build. */
  what: string;
  /** Extra environment of the build (GOFLAGS, CGO_ENABLED, ...). */
  env?: NodeJS.ProcessEnv;
}

export function goModuleHash(m: Pick<GoModule, 'dir' | 'files'>): string {
  const h = createHash('sha256');
  for (const f of m.files) h.update(f).update('\0').update(fs.readFileSync(path.join(m.dir, f))).update('\0');
  return h.digest('hex').slice(0, 16);
}

/** Where the binary is (or will be) for the module as it is now. */
export function goModuleBinaryPath(m: GoModule): string {
  const root = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'flint', m.cacheName);
  return path.join(root, goModuleHash(m), m.binary);
}

/** The binary's path, built first with `go` when the cache has none for this module. */
export function ensureGoModuleBinary(m: GoModule, go: string, log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): string {
  const bin = goModuleBinaryPath(m);
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(path.dirname(bin), { recursive: true });
  // Built beside its final name and renamed: an interrupted build leaves no binary that looks whole.
  const partial = `${bin}.partial-${process.pid}`;
  const started = Date.now();
  log(`building ${m.what} into ${bin}`);
  execFileSync(go, ['build', '-trimpath', '-ldflags', '-s -w', '-o', partial, '.'], {
    cwd: m.dir,
    env: { ...process.env, ...m.env },
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 30 * 60_000,
  });
  fs.renameSync(partial, bin);
  log(`built in ${Math.round((Date.now() - started) / 1000)} s`);
  return bin;
}
