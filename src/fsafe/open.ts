// Opening a file where user content can reach without following a link at
// its last component. This layer sits at the bottom beside api/ and config/
// (it needs only node:fs and the error registry) so that every component
// that writes or reads such a file (executor, builder, controller, fetcher,
// archive) can use the one helper: the server runs as root, so following a
// link planted by an archive or a function would turn "append to this log"
// into "append to any file on the host".
import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { FlintError } from '../api/errors.ts';

const C = fs.constants;

/** How a file is opened: `create` fails when it exists, `append` and `replace` create it when missing. */
export type OpenHow = 'read' | 'append' | 'create' | 'replace';

const FLAGS: Record<OpenHow, number> = {
  read: C.O_RDONLY,
  append: C.O_WRONLY | C.O_CREAT | C.O_APPEND,
  create: C.O_WRONLY | C.O_CREAT | C.O_EXCL,
  // Not O_TRUNC: that would empty a file hard-linked from elsewhere before the checks below could refuse it.
  replace: C.O_WRONLY | C.O_CREAT,
};

export function unsafePath(file: string, why: string): FlintError {
  return new FlintError('FLINT_ERR_UNSAFE_PATH', `refusing ${file}: ${why}`);
}

/**
 * Opens `file` without following a link at its last component, and only if
 * it is a regular file with a single name (a hard link to a file elsewhere
 * would be written through as well). O_NONBLOCK keeps a planted FIFO from
 * hanging the server on open; it has no effect on regular files.
 */
export function openNoFollow(file: string, how: OpenHow, mode = 0o644): number {
  let fd: number;
  try {
    fd = fs.openSync(file, FLAGS[how] | C.O_NOFOLLOW | C.O_NONBLOCK, mode);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw unsafePath(file, 'it is a symbolic link');
    throw err;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw unsafePath(file, 'it is not a regular file');
    if (how !== 'read' && st.nlink > 1) throw unsafePath(file, `it has ${st.nlink} hard links`);
    if (how === 'replace') fs.ftruncateSync(fd, 0);
    return fd;
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

/** An append stream on `file`, opened as openNoFollow does. */
export function appendStreamNoFollow(file: string, mode = 0o644): fs.WriteStream {
  return fs.createWriteStream(file, { fd: openNoFollow(file, 'append', mode) });
}

/** Writes `data` to `file` (made anew when `how` is `create`), without following a link. */
export function writeFileNoFollow(file: string, data: string | Uint8Array, how: 'create' | 'replace', mode = 0o644): void {
  const fd = openNoFollow(file, how, mode);
  try {
    fs.writeFileSync(fd, data);
  } finally {
    fs.closeSync(fd);
  }
}

/** Copies the server's own file `from` to `to`, which is written as writeFileNoFollow does. */
export async function copyFileNoFollow(from: string, to: string, how: 'create' | 'replace', mode = 0o644): Promise<void> {
  await pipeline(fs.createReadStream(from), fs.createWriteStream(to, { fd: openNoFollow(to, how, mode) }));
}

/** A read stream on `file`, refusing a link at its last component. */
export function readStreamNoFollow(file: string, opts: { start?: number; end?: number } = {}): fs.ReadStream {
  return fs.createReadStream(file, { ...opts, fd: openNoFollow(file, 'read') });
}

/** A read of a file `size` bytes long: `text` is bytes [start, next), as UTF-8. */
export interface FileRange {
  text: string;
  start: number;
  /** The byte after the last one read: where the next read goes on. */
  next: number;
  size: number;
  /** Which file this is (device and inode; empty when it does not exist): a reader that sees it change starts over. */
  file: string;
}

/**
 * Up to `maxBytes` of `file` from byte `from`, or its last `maxBytes` when `from` is undefined, opened as
 * openNoFollow does. A read ends after its last whole line, so a line being written is read once it is whole and no
 * UTF-8 character is cut in two (only a line longer than `maxBytes` is cut, at the cap). One from the end may start
 * inside a line (the caller drops that line). A `from` past the end (the file was cut) reads from the start. A
 * missing file reads as empty.
 */
export function readRangeNoFollow(file: string, from: number | undefined, maxBytes: number): FileRange {
  let fd: number;
  try {
    fd = openNoFollow(file, 'read');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { text: '', start: 0, next: 0, size: 0, file: '' };
    throw err;
  }
  try {
    const st = fs.fstatSync(fd);
    const size = st.size;
    const start = from === undefined ? Math.max(0, size - maxBytes) : from > size ? 0 : from;
    const buf = Buffer.alloc(Math.min(size - start, maxBytes));
    const read = fs.readSync(fd, buf, 0, buf.length, start);
    const lastNewline = read > 0 ? buf.lastIndexOf(0x0a, read - 1) : -1;
    const end = lastNewline >= 0 ? lastNewline + 1 : read === maxBytes ? read : 0;
    return { text: buf.toString('utf8', 0, end), start, next: start + end, size, file: `${st.dev}:${st.ino}` };
  } finally {
    fs.closeSync(fd);
  }
}
