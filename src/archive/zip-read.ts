// Reading a zip entry by entry, shared by inspection and extraction so both
// see the same entries the same way: names taken from the central directory
// and required to match the local header's (a zip whose two names differ
// reads as different trees to different tools), a backslash in a name
// refused (yauzl's strict names: a separator to Windows tools, a plain
// character here), and the declared sizes checked against what actually
// inflates.
import type { Readable } from 'node:stream';
import yauzl from 'yauzl';
import { FlintError } from '../api/errors.ts';
import type { EntryKind } from './tree-model.ts';

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;
const MAX_LINK_TARGET = 4096;

const bad = (message: string) => new FlintError('FLINT_ERR_BAD_ARCHIVE', message);

const OPTIONS = { lazyEntries: true, autoClose: true, strictFileNames: true, decodeStrings: true, validateEntrySizes: true };

export function openZip(src: string | Buffer): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    const opened = (err: Error | null, zip?: yauzl.ZipFile) => {
      if (err || !zip) reject(bad(`not a zip archive: ${err?.message ?? 'unreadable'}`));
      else resolve(zip);
    };
    if (typeof src === 'string') yauzl.open(src, OPTIONS, opened);
    else yauzl.fromBuffer(src, OPTIONS, opened);
  });
}

// yauzl refuses these names itself, before an entry is handed out: said here as every other refusal of a name is.
const YAUZL_NAME_PROBLEMS: [RegExp, string][] = [
  [/^invalid relative path: (.*)$/s, "leaves the archive's directory ('..')"],
  [/^absolute path: (.*)$/s, 'has an absolute path'],
  [/^invalid characters in fileName: (.*)$/s, 'uses backslashes'],
];

function nameProblem(message: string): string | undefined {
  for (const [re, what] of YAUZL_NAME_PROBLEMS) {
    const m = re.exec(message);
    if (m) return `entry '${m[1]}' ${what}`;
  }
  return undefined;
}

/** The next entry, or undefined after the last. */
export function nextEntry(zip: yauzl.ZipFile): Promise<yauzl.Entry | undefined> {
  return new Promise((resolve, reject) => {
    const onEntry = (e: yauzl.Entry) => done(() => resolve(e));
    const onEnd = () => done(() => resolve(undefined));
    const onError = (err: Error) => done(() => reject(bad(nameProblem(err.message) ?? `not a valid zip archive: ${err.message}`)));
    const done = (f: () => void) => {
      zip.off('entry', onEntry).off('end', onEnd).off('error', onError);
      f();
    };
    zip.once('entry', onEntry).once('end', onEnd).once('error', onError);
    zip.readEntry();
  });
}

export function isSymlinkEntry(entry: yauzl.Entry): boolean {
  const madeBy = entry.versionMadeBy >> 8;
  // Only unix-made entries carry a file mode in the high external attribute bits.
  return madeBy === 3 && ((entry.externalFileAttributes >>> 16) & S_IFMT) === S_IFLNK;
}

export function entryKind(entry: yauzl.Entry): EntryKind {
  if (isSymlinkEntry(entry)) return 'link';
  return entry.fileName.endsWith('/') ? 'dir' : 'file';
}

/** Refuses an entry whose raw name holds a backslash, or whose local header names something else. */
export async function checkEntryName(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<void> {
  const local = await new Promise<Buffer>((resolve, reject) => {
    zip.readLocalFileHeader(entry, {}, (err, header) => {
      if (err || !header) reject(bad(`entry '${entry.fileName}' cannot be read: ${err?.message}`));
      else resolve(header.fileName);
    });
  });
  if (!local.equals(entry.fileNameRaw)) {
    throw bad(`entry '${entry.fileName}' is named '${local.toString('utf8')}' in its local header: the two names must agree`);
  }
}

export function entryStream(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<Readable> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) reject(bad(`entry '${entry.fileName}' cannot be read: ${err?.message}`));
      else resolve(stream);
    });
  });
}

/**
 * Feeds the entry's inflated bytes to `onChunk`; an entry inflating past its
 * declared size, or failing its checksum, is refused naming it.
 */
export async function readEntry(zip: yauzl.ZipFile, entry: yauzl.Entry, onChunk: (c: Buffer) => void): Promise<void> {
  const stream = await entryStream(zip, entry);
  try {
    for await (const c of stream) onChunk(c as Buffer);
  } catch (err) {
    stream.destroy();
    if (err instanceof FlintError) throw err;
    throw bad(`entry '${entry.fileName}' cannot be unpacked: ${(err as Error).message}`);
  }
}

/** A symlink entry's target. */
export async function readLinkTarget(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<string> {
  if (entry.uncompressedSize > MAX_LINK_TARGET) throw bad(`symlink '${entry.fileName}' has a target longer than ${MAX_LINK_TARGET} bytes`);
  const chunks: Buffer[] = [];
  await readEntry(zip, entry, (c) => chunks.push(c));
  return Buffer.concat(chunks).toString('utf8');
}
