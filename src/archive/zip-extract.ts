// Unpacking a zip so that nothing lands outside its tree, whatever the
// archive says. The entries are modelled as they are unpacked (tree-model.ts:
// no path through a link or a file, no name used twice, links resolved
// through the tree must stay in it), and independently of that model the
// writes themselves cannot be led astray: every directory is made component
// by component below the tree's root and lstat-checked to be a real one
// (fsafe/mkdir.ts), every file is created with O_CREAT|O_EXCL|O_NOFOLLOW,
// symlinks are made last, after every file, and then resolved again on disk.
// The bytes actually inflated count against the cap (declared sizes can lie).
// All of it goes into a temporary sibling directory renamed into place at
// the end: a refused archive leaves nothing behind.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type yauzl from 'yauzl';
import { FlintError } from '../api/errors.ts';
import { mkdirUnder } from '../fsafe/mkdir.ts';
import { openNoFollow, unsafePath } from '../fsafe/open.ts';
import { fsTree } from './fs-tree.ts';
import { ArchiveTree, linkProblem } from './tree-model.ts';
import { checkEntryName, entryKind, entryStream, nextEntry, openZip, readEntry, readLinkTarget } from './zip-read.ts';

export interface ExtractLimits {
  maxEntries: number;
  /** Cap on the bytes actually unpacked, all entries together. */
  maxBytes: number;
}

export const DEFAULT_EXTRACT_LIMITS: ExtractLimits = { maxEntries: 100_000, maxBytes: 1024 ** 3 };

// Entries declaring at most this are read whole (yauzl checks the declared size against what inflates).
const SMALL_FILE = 256 * 1024;

const bad = (message: string) => new FlintError('FLINT_ERR_BAD_ARCHIVE', message);
const tooLarge = (max: number, name: string) => new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `the archive unpacks to more than ${max} bytes (at entry '${name}')`);

/** Where each write goes wrong on disk (a link or a file in the way), said as the archive's fault. */
function onDisk<T>(name: string, write: () => T): T {
  try {
    return write();
  } catch (err) {
    if (err instanceof FlintError && err.code !== 'FLINT_ERR_UNSAFE_PATH') throw err;
    throw bad(`entry '${name}' cannot be unpacked: ${(err as Error).message}`);
  }
}

async function unpack(zip: yauzl.ZipFile, dest: string, limits: ExtractLimits): Promise<{ entries: number; bytes: number }> {
  const tree = new ArchiveTree();
  // Directories already made and checked: the temporary tree is ours alone, so once is enough.
  const made = new Map<string, string>([['', dest]]);
  const dirOf = (name: string, parts: string[]) => {
    const key = parts.join('/');
    let at = made.get(key);
    if (at === undefined) {
      at = onDisk(name, () => mkdirUnder(dest, key));
      made.set(key, at);
    }
    return at;
  };
  const links: { name: string; parts: string[]; target: string }[] = [];
  let entries = 0;
  let bytes = 0;
  let declared = 0;

  for (let entry = await nextEntry(zip); entry; entry = await nextEntry(zip)) {
    if (++entries > limits.maxEntries) throw new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `the archive has more than ${limits.maxEntries} entries`);
    const name = entry.fileName;
    declared += entry.uncompressedSize;
    if (declared > limits.maxBytes) throw tooLarge(limits.maxBytes, name);
    const count = (c: Buffer) => {
      bytes += c.length;
      if (bytes > limits.maxBytes) throw tooLarge(limits.maxBytes, name);
    };
    await checkEntryName(zip, entry);
    const kind = entryKind(entry);
    if (kind === 'link') {
      const target = await readLinkTarget(zip, entry);
      links.push({ name, parts: tree.add(name, kind, target), target });
      continue;
    }
    const parts = tree.add(name, kind);
    if (kind === 'dir') {
      dirOf(name, parts);
      continue;
    }
    const file = path.join(dirOf(name, parts.slice(0, -1)), parts[parts.length - 1]);
    const mode = (entry.externalFileAttributes >>> 16) & 0o111 ? 0o755 : 0o644;
    const fd = onDisk(name, () => openNoFollow(file, 'create', mode));
    if (entry.uncompressedSize <= SMALL_FILE) {
      // Most files of a package are small: one buffer and one write beat a stream pipeline each.
      const chunks: Buffer[] = [];
      try {
        await readEntry(zip, entry, (c) => {
          count(c);
          chunks.push(c);
        });
        fs.writeSync(fd, Buffer.concat(chunks));
      } finally {
        fs.closeSync(fd);
      }
      continue;
    }
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        try {
          count(chunk);
          cb(null, chunk);
        } catch (err) {
          cb(err as Error);
        }
      },
    });
    try {
      await pipeline(await entryStream(zip, entry), counter, fs.createWriteStream(file, { fd }));
    } catch (err) {
      if (err instanceof FlintError) throw err;
      throw bad(`entry '${name}' cannot be unpacked: ${(err as Error).message}`);
    }
  }
  tree.finish();
  // Last, so that no entry above could have been written through a link.
  for (const l of links) {
    const parent = onDisk(l.name, () => mkdirUnder(dest, l.parts.slice(0, -1).join('/')));
    onDisk(l.name, () => fs.symlinkSync(l.target, path.join(parent, l.parts[l.parts.length - 1])));
  }
  // The links as they are on disk, resolved without the kernel's help: the model above is not trusted alone.
  const disk = fsTree(dest);
  for (const l of links) {
    const problem = linkProblem(disk, l.name, l.parts, l.target);
    if (problem) throw bad(problem);
  }
  return { entries, bytes };
}

/**
 * Unpacks the zip at `zipPath` into `destDir` (which must not exist, or be
 * an empty directory). Rejects with FLINT_ERR_BAD_ARCHIVE or
 * FLINT_ERR_PAYLOAD_TOO_LARGE, leaving `destDir` as it was.
 */
export async function extractZip(zipPath: string, destDir: string, limits: Partial<ExtractLimits> = {}): Promise<{ entries: number; bytes: number }> {
  const l = { ...DEFAULT_EXTRACT_LIMITS, ...limits };
  const dest = path.resolve(destDir);
  const st = fs.lstatSync(dest, { throwIfNoEntry: false });
  // A link here would have the tree renamed over whatever it points to.
  if (st && !st.isDirectory()) throw unsafePath(dest, st.isSymbolicLink() ? 'it is a symbolic link' : 'it is not a directory');
  const existing = st !== undefined;
  if (existing && fs.readdirSync(dest).length > 0) throw new FlintError('FLINT_ERR_INTERNAL', `cannot unpack into ${dest}: it is not empty`);
  const tmp = `${dest}.part-${randomBytes(4).toString('hex')}`;
  fs.mkdirSync(path.dirname(tmp), { recursive: true });
  fs.mkdirSync(tmp, { mode: 0o755 });
  let zip: yauzl.ZipFile | undefined;
  try {
    zip = await openZip(zipPath);
    const result = await unpack(zip, tmp, l);
    if (existing) fs.rmdirSync(dest);
    fs.renameSync(tmp, dest);
    return result;
  } catch (err) {
    zip?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}
