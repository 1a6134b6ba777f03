// Safe unpacking of a zip: every entry name and symlink target checked (see
// zip-inspect.ts), symlinks made last so no file is written through one, the
// bytes actually inflated counted against the cap (declared sizes can lie),
// and all of it into a temporary sibling directory renamed into place at the
// end: a refused archive leaves nothing behind.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import { FlintError } from '../api/errors.ts';
import { entryNameProblem, isSymlinkEntry, linkTargetProblem } from './zip-inspect.ts';

export interface ExtractLimits {
  maxEntries: number;
  /** Cap on the bytes actually unpacked, all entries together. */
  maxBytes: number;
}

export const DEFAULT_EXTRACT_LIMITS: ExtractLimits = { maxEntries: 100_000, maxBytes: 1024 ** 3 };

// Entries declaring at most this are read whole (yauzl checks the declared size against what inflates).
const SMALL_FILE = 256 * 1024;

const bad = (message: string) => new FlintError('FLINT_ERR_BAD_ARCHIVE', message);

function openZip(file: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.open(file, { lazyEntries: true, autoClose: true, strictFileNames: false, decodeStrings: true, validateEntrySizes: true }, (err, zip) => {
      if (err || !zip) reject(bad(`not a zip archive: ${err?.message ?? 'unreadable'}`));
      else resolve(zip);
    });
  });
}

function readStream(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<NodeJS.ReadableStream> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) reject(bad(`entry '${entry.fileName}' cannot be read: ${err?.message}`));
      else resolve(stream);
    });
  });
}

async function unpack(zip: yauzl.ZipFile, dest: string, limits: ExtractLimits): Promise<{ entries: number; bytes: number }> {
  const seen = new Set<string>();
  const links: { at: string; target: string }[] = [];
  const made = new Set<string>([dest]);
  let entries = 0;
  let bytes = 0;
  const next = (): Promise<yauzl.Entry | undefined> =>
    new Promise((resolve, reject) => {
      const onEntry = (e: yauzl.Entry) => done(() => resolve(e));
      const onEnd = () => done(() => resolve(undefined));
      const onError = (err: Error) => done(() => reject(bad(`not a valid zip archive: ${err.message}`)));
      const done = (f: () => void) => {
        zip.off('entry', onEntry).off('end', onEnd).off('error', onError);
        f();
      };
      zip.once('entry', onEntry).once('end', onEnd).once('error', onError);
      zip.readEntry();
    });

  for (let entry = await next(); entry; entry = await next()) {
    entries++;
    if (entries > limits.maxEntries) throw new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `the archive has more than ${limits.maxEntries} entries`);
    const name = entry.fileName;
    const problem = entryNameProblem(name);
    if (problem) throw bad(problem);
    const rel = name.replace(/\/+$/, '');
    if (rel === '' || rel === '.') continue;
    if (seen.has(rel)) throw bad(`entry '${name}' appears twice`);
    seen.add(rel);
    const target = path.join(dest, rel);
    if (name.endsWith('/')) {
      fs.mkdirSync(target, { recursive: true, mode: 0o755 });
      made.add(target);
      continue;
    }
    if (isSymlinkEntry(entry)) {
      const stream = await readStream(zip, entry);
      const chunks: Buffer[] = [];
      for await (const c of stream) chunks.push(c as Buffer);
      const linkTarget = Buffer.concat(chunks).toString('utf8');
      const linkProblem = linkTargetProblem(rel, linkTarget);
      if (linkProblem) throw bad(linkProblem);
      links.push({ at: target, target: linkTarget });
      continue;
    }
    const parent = path.dirname(target);
    if (!made.has(parent)) {
      fs.mkdirSync(parent, { recursive: true, mode: 0o755 });
      made.add(parent);
    }
    const mode = (entry.externalFileAttributes >>> 16) & 0o111 ? 0o755 : 0o644;
    if (entry.uncompressedSize <= SMALL_FILE) {
      // Most files of a package are small: one buffer and one write beat a stream pipeline each.
      const chunks: Buffer[] = [];
      for await (const c of await readStream(zip, entry)) {
        bytes += (c as Buffer).length;
        if (bytes > limits.maxBytes) throw new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `the archive unpacks to more than ${limits.maxBytes} bytes`);
        chunks.push(c as Buffer);
      }
      await fs.promises.writeFile(target, Buffer.concat(chunks), { flag: 'wx', mode });
      continue;
    }
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        if (bytes > limits.maxBytes) cb(new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `the archive unpacks to more than ${limits.maxBytes} bytes`));
        else cb(null, chunk);
      },
    });
    try {
      await pipeline(await readStream(zip, entry), counter, fs.createWriteStream(target, { flags: 'wx', mode }));
    } catch (err) {
      if (err instanceof FlintError) throw err;
      throw bad(`entry '${name}' cannot be unpacked: ${(err as Error).message}`);
    }
  }
  // Last, so that no entry above could have been written through a link.
  for (const l of links) {
    fs.mkdirSync(path.dirname(l.at), { recursive: true, mode: 0o755 });
    try {
      fs.symlinkSync(l.target, l.at);
    } catch (err) {
      throw bad(`symlink '${path.relative(dest, l.at)}' conflicts with another entry: ${(err as NodeJS.ErrnoException).code}`);
    }
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
  const existing = fs.existsSync(dest);
  if (existing && fs.readdirSync(dest).length > 0) throw new FlintError('FLINT_ERR_INTERNAL', `cannot unpack into ${dest}: it is not empty`);
  const tmp = `${dest}.part-${randomBytes(4).toString('hex')}`;
  fs.mkdirSync(tmp, { recursive: true, mode: 0o755 });
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
