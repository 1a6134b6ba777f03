// Unpacked deployment archives, one directory per archive (by sha256), shared
// by every instance of that code: a cold start links the files into the
// worker's code directory instead of unpacking the zip again. Entries of code
// no package deploys any more are removed.
import fs from 'node:fs';
import path from 'node:path';
import { extractZip } from '../archive/index.ts';

export class DeployCache {
  readonly #dir: string;
  readonly #maxUnpackedBytes: number;
  readonly #unpacking = new Map<string, Promise<string>>();

  constructor(dir: string, maxUnpackedBytes: number) {
    this.#dir = dir;
    this.#maxUnpackedBytes = maxUnpackedBytes;
    // A previous run's entries may be half-written or of code long gone.
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  /** The unpacked tree of the zip at `zipPath` (whose content hash is `sha256`). */
  unpacked(sha256: string, zipPath: string): Promise<string> {
    const known = this.#unpacking.get(sha256);
    if (known) return known;
    const target = path.join(this.#dir, sha256);
    const p = extractZip(zipPath, target, { maxBytes: this.#maxUnpackedBytes }).then(() => {
      readOnly(target);
      return target;
    });
    p.catch(() => this.#unpacking.delete(sha256));
    this.#unpacking.set(sha256, p);
    return p;
  }

  /** Drops entries of archives not in `inUse`. */
  retain(inUse: ReadonlySet<string>): void {
    for (const sha of [...this.#unpacking.keys()]) {
      if (inUse.has(sha)) continue;
      const p = this.#unpacking.get(sha);
      this.#unpacking.delete(sha);
      // Instances already running keep their links; the files live on through them.
      void p?.then(
        (dir) => fs.rmSync(dir, { recursive: true, force: true }),
        () => {},
      );
    }
  }
}

/** Files shared through hard links must not be changed through any one of them. */
function readOnly(dir: string): void {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) readOnly(p);
    else if (e.isFile()) fs.chmodSync(p, fs.statSync(p).mode & 0o555);
  }
}

/** Recreates `src` at `dest` with hard links (copies across file systems). */
export function linkTree(src: string, dest: string): void {
  fs.mkdirSync(dest, { recursive: true });
  for (const e of fs.readdirSync(src, { withFileTypes: true })) {
    const from = path.join(src, e.name);
    const to = path.join(dest, e.name);
    if (e.isDirectory()) linkTree(from, to);
    else if (e.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(from), to);
    else {
      try {
        fs.linkSync(from, to);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
        fs.copyFileSync(from, to);
      }
    }
  }
}
