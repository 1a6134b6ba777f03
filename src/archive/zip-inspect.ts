// A zip's table of contents checked without unpacking anything: the control
// plane refuses a bad archive when a package names it, before any build or
// instance would trip over it. The same rules hold again at extraction, which
// also counts the bytes actually inflated (declared sizes can lie).
import path from 'node:path';
import yauzl from 'yauzl';
import { FlintError } from '../api/errors.ts';

export interface InspectLimits {
  maxEntries: number;
  /** Cap on the declared unpacked total. */
  maxBytes: number;
}

export interface ZipSummary {
  entries: number;
  /** Declared unpacked total. */
  bytes: number;
}

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;
const MAX_LINK_TARGET = 4096;

const bad = (message: string) => new FlintError('FLINT_ERR_BAD_ARCHIVE', message);

/** Why an entry name is unsafe to unpack, or undefined when it is fine. */
export function entryNameProblem(name: string): string | undefined {
  if (name === '') return 'an entry has an empty name';
  if (name.includes('\0')) return `entry '${name}' has a NUL byte in its name`;
  if (name.includes('\\')) return `entry '${name}' uses backslashes`;
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) return `entry '${name}' has an absolute path`;
  if (name.split('/').includes('..')) return `entry '${name}' leaves the archive's directory ('..')`;
  return undefined;
}

/** Why a symlink's target is unsafe (it must stay inside the tree), or undefined. */
export function linkTargetProblem(name: string, target: string): string | undefined {
  if (target === '' || target.includes('\0')) return `symlink '${name}' has an invalid target`;
  if (target.startsWith('/')) return `symlink '${name}' points to the absolute path '${target}'`;
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(name.replace(/\/+$/, '')), target));
  if (resolved === '..' || resolved.startsWith('../')) return `symlink '${name}' points to '${target}', outside the archive`;
  return undefined;
}

export function isSymlinkEntry(entry: yauzl.Entry): boolean {
  const madeBy = entry.versionMadeBy >> 8;
  // Only unix-made entries carry a file mode in the high external attribute bits.
  return madeBy === 3 && ((entry.externalFileAttributes >>> 16) & S_IFMT) === S_IFLNK;
}

function readSmall(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<string> {
  return new Promise((resolve, reject) => {
    if (entry.uncompressedSize > MAX_LINK_TARGET) {
      reject(bad(`symlink '${entry.fileName}' has a target longer than ${MAX_LINK_TARGET} bytes`));
      return;
    }
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) {
        reject(bad(`entry '${entry.fileName}' cannot be read: ${err?.message}`));
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', (e) => reject(bad(`entry '${entry.fileName}' cannot be read: ${e.message}`)));
      stream.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
  });
}

/** Checks every entry of the zip (a file path, or its bytes); rejects with FLINT_ERR_BAD_ARCHIVE or FLINT_ERR_PAYLOAD_TOO_LARGE. */
export function inspectZip(zipFile: string | Buffer, limits: InspectLimits): Promise<ZipSummary> {
  return new Promise((resolve, reject) => {
    const options = { lazyEntries: true, autoClose: true, strictFileNames: false, decodeStrings: true, validateEntrySizes: true };
    const opened = (err: Error | null, zip?: yauzl.ZipFile) => {
      if (err || !zip) {
        reject(bad(`not a valid zip archive: ${err?.message ?? 'unreadable'}`));
        return;
      }
      const seen = new Set<string>();
      let entries = 0;
      let bytes = 0;
      const fail = (e: unknown) => {
        zip.close();
        reject(e instanceof FlintError ? e : bad(`not a valid zip archive: ${(e as Error).message}`));
      };
      zip.on('error', fail);
      zip.on('end', () => resolve({ entries, bytes }));
      zip.on('entry', (entry: yauzl.Entry) => {
        entries++;
        if (entries > limits.maxEntries) return fail(new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `the archive has more than ${limits.maxEntries} entries`));
        bytes += entry.uncompressedSize;
        if (bytes > limits.maxBytes) return fail(new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `the archive unpacks to more than ${limits.maxBytes} bytes`));
        const problem = entryNameProblem(entry.fileName);
        if (problem) return fail(bad(problem));
        const key = entry.fileName.replace(/\/+$/, '');
        if (seen.has(key)) return fail(bad(`entry '${entry.fileName}' appears twice`));
        seen.add(key);
        if (!isSymlinkEntry(entry)) return zip.readEntry();
        readSmall(zip, entry).then((target) => {
          const linkProblem = linkTargetProblem(entry.fileName, target);
          if (linkProblem) fail(bad(linkProblem));
          else zip.readEntry();
        }, fail);
      });
      zip.readEntry();
    };
    if (typeof zipFile === 'string') yauzl.open(zipFile, options, opened);
    else yauzl.fromBuffer(zipFile, options, opened);
  });
}
