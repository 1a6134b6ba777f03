// Unpacked deployment archives, one directory per archive (by sha256), shared
// by every instance of that code: a cold start gets the files as hard links
// instead of unpacking the zip again. Linking is a system call per file
// (about 25 ms for a 2000-file node_modules here), so one linked copy per
// archive is kept ready and a cold start only renames it into place; the next
// copy is made in the background. Entries of code no package deploys any
// more are removed.
//
// Every directory here is the server's own and made without following a
// link (src/fsafe); a link found where one should be fails the unpacking or
// the copy instead of sending an archive's files, or an instance's code,
// somewhere else.
import fs from 'node:fs';
import path from 'node:path';
import { extractZip } from '../archive/index.ts';
import { checkOwnDirectory, mkdirUnder } from '../fsafe/mkdir.ts';

export class DeployCache {
  readonly #dir: string;
  readonly #maxUnpackedBytes: number;
  readonly #unpacking = new Map<string, Promise<string>>();
  /** A ready linked copy per archive, or the promise of one being made. */
  readonly #spares = new Map<string, Promise<string | undefined>>();
  #seq = 0;

  constructor(dir: string, maxUnpackedBytes: number) {
    this.#dir = dir;
    this.#maxUnpackedBytes = maxUnpackedBytes;
    // A previous run's entries may be half-written or of code long gone.
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    checkOwnDirectory(dir);
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

  /** Unpacks ahead of need, with a linked copy ready for the first instance. */
  async warm(sha256: string, zipPath: string): Promise<void> {
    const tree = await this.unpacked(sha256, zipPath);
    if (!this.#spares.has(sha256)) this.#makeSpare(sha256, tree);
  }

  /** Puts the unpacked archive at `dest` (which must not exist), as hard links. */
  async checkout(sha256: string, zipPath: string, dest: string): Promise<void> {
    const tree = await this.unpacked(sha256, zipPath);
    const spare = await this.#spares.get(sha256);
    this.#spares.delete(sha256);
    let placed = false;
    if (spare) {
      try {
        await fs.promises.rename(spare, dest);
        placed = true;
      } catch {
        await fs.promises.rm(spare, { recursive: true, force: true });
      }
    }
    if (!placed) await linkTree(tree, dest);
    this.#makeSpare(sha256, tree);
  }

  #makeSpare(sha256: string, tree: string): void {
    const at = path.join(this.#dir, 'spares', `${sha256}-${++this.#seq}`);
    const made = Promise.resolve()
      .then(() => mkdirUnder(this.#dir, 'spares', 0o700))
      .then(() => linkTree(tree, at))
      .then(
      () => at,
      async () => {
        await fs.promises.rm(at, { recursive: true, force: true });
        return undefined;
      },
    );
    this.#spares.set(sha256, made);
  }

  /** Drops entries of archives not in `inUse`. */
  retain(inUse: ReadonlySet<string>): void {
    for (const sha of [...this.#unpacking.keys()]) {
      if (inUse.has(sha)) continue;
      const p = this.#unpacking.get(sha);
      this.#unpacking.delete(sha);
      const spare = this.#spares.get(sha);
      this.#spares.delete(sha);
      void spare?.then((dir) => (dir ? fs.promises.rm(dir, { recursive: true, force: true }) : undefined));
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
    else if (e.isFile()) fs.chmodSync(p, fs.lstatSync(p).mode & 0o555);
  }
}

/**
 * Recreates `src` at `dest` (which must not exist; its parent must) with
 * hard links (copies across file systems). Each directory is made anew, so
 * a link already at `dest` fails the copy rather than being written through.
 */
export async function linkTree(src: string, dest: string): Promise<void> {
  await fs.promises.mkdir(dest);
  const entries = await fs.promises.readdir(src, { withFileTypes: true });
  // One directory's entries at once: the thread pool overlaps the system calls.
  await Promise.all(
    entries.map(async (e) => {
      const from = path.join(src, e.name);
      const to = path.join(dest, e.name);
      if (e.isDirectory()) return linkTree(from, to);
      if (e.isSymbolicLink()) return fs.promises.symlink(await fs.promises.readlink(from), to);
      try {
        await fs.promises.link(from, to);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
        await fs.promises.copyFile(from, to);
      }
    }),
  );
}
