// Zips made by Flint (the CLI's directories, a build's output): sorted names
// so the same tree gives the same bytes, executable bits kept, symlinks kept
// when they stay inside the tree (resolved through the tree's other links,
// as tree-model.ts does for archives) and refused when they leave it. A
// build's output is user content: its files are read without following a
// link, so a name swapped for a link after the walk reads nothing else.
import fs from 'node:fs';
import path from 'node:path';
import yazl from 'yazl';
import { FlintError } from '../api/errors.ts';
import { sha256File } from './checksum.ts';
import { openNoFollow, readStreamNoFollow } from '../fsafe/open.ts';
import { fsTree } from './fs-tree.ts';
import { linkProblem, type TreeView } from './tree-model.ts';

// A fixed time: the archive's bytes (and so its sha256) depend only on the content.
const MTIME = new Date('2000-01-01T00:00:00Z');

function write(zip: yazl.ZipFile, outPath: string): Promise<{ sha256: string; size: number }> {
  return new Promise((resolve, reject) => {
    // A build's zip goes into its work directory, where the build could have left a link by that name.
    const out = fs.createWriteStream(outPath, { fd: openNoFollow(outPath, 'replace') });
    zip.outputStream.pipe(out).on('error', reject);
    out.on('close', () => {
      sha256File(outPath).then((sha256) => resolve({ sha256, size: fs.statSync(outPath).size }), reject);
    });
    out.on('error', reject);
    zip.end();
  });
}

function addTree(zip: yazl.ZipFile, tree: TreeView, root: string, dir: string): void {
  const entries = fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const full = path.join(dir, e.name);
    const rel = path.relative(root, full).split(path.sep).join('/');
    if (e.isSymbolicLink()) {
      const target = fs.readlinkSync(full);
      const problem = linkProblem(tree, rel, rel.split('/'), target);
      if (problem) throw new FlintError('FLINT_ERR_BAD_ARCHIVE', problem);
      zip.addBuffer(Buffer.from(target), rel, { mtime: MTIME, mode: 0o120777, compress: false });
    } else if (e.isDirectory()) {
      zip.addEmptyDirectory(rel, { mtime: MTIME, mode: 0o40755 });
      addTree(zip, tree, root, full);
    } else if (e.isFile()) {
      const st = fs.lstatSync(full);
      const mode = st.mode & 0o111 ? 0o100755 : 0o100644;
      zip.addReadStreamLazy(rel, { mtime: MTIME, mode, size: st.size }, (cb) => {
        try {
          cb(null, readStreamNoFollow(full));
        } catch (err) {
          cb(err as Error, undefined as never);
        }
      });
    } else {
      throw new FlintError('FLINT_ERR_BAD_ARCHIVE', `'${rel}' is neither a file, a directory nor a symlink`);
    }
  }
}

/** Zips the contents of `dir` (at the root of the zip) into `outPath`. */
export async function zipDirectory(dir: string, outPath: string): Promise<{ sha256: string; size: number }> {
  const zip = new yazl.ZipFile();
  const root = path.resolve(dir);
  addTree(zip, fsTree(root), root, root);
  return write(zip, outPath);
}

/** Zips the given files under the given names. */
export async function zipFiles(files: { path: string; name: string }[], outPath: string): Promise<{ sha256: string; size: number }> {
  const zip = new yazl.ZipFile();
  for (const f of [...files].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const exec = fs.statSync(f.path).mode & 0o111;
    zip.addFile(f.path, f.name, { mtime: MTIME, mode: exec ? 0o100755 : 0o100644 });
  }
  return write(zip, outPath);
}

const LOCAL = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
const EMPTY = Buffer.from([0x50, 0x4b, 0x05, 0x06]);

export function isZipBuffer(buf: Uint8Array): boolean {
  const head = Buffer.from(buf.subarray(0, 4));
  return head.equals(LOCAL) || head.equals(EMPTY);
}

export async function isZipFile(file: string): Promise<boolean> {
  const fd = await fs.promises.open(file, 'r');
  try {
    const buf = Buffer.alloc(4);
    const { bytesRead } = await fd.read(buf, 0, 4, 0);
    return bytesRead === 4 && isZipBuffer(buf);
  } finally {
    await fd.close();
  }
}
