// Random secrets, constant-time comparison and owner-only files: the small
// primitives every credential in src/auth is built from.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { FlintError } from '../api/errors.ts';

/** A random URL-safe string carrying `bytes` bytes of entropy (32 bytes = 256 bits, 43 characters). */
export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * Compares two secrets in time independent of where they differ. Both sides
 * are hashed first because timingSafeEqual needs equal lengths, and checking
 * lengths up front would tell a caller how long the secret is.
 */
export function secretsEqual(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** Prepared form of `secretsEqual` for a secret compared on every request. */
export function secretMatcher(expected: string): (given: string) => boolean {
  const want = digest(expected);
  return (given) => timingSafeEqual(digest(given), want);
}

/** Creates `dir` as 0700, and tightens it if it already exists with group or other access. */
export function ensurePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = fs.statSync(dir);
  if ((st.mode & 0o077) !== 0) fs.chmodSync(dir, 0o700);
}

/**
 * Writes a file only its owner can read. The content goes to a fresh 0600
 * file that is then renamed over the target, so a reader never sees a torn
 * file, the mode never depends on the umask or on an older file's mode, and
 * a symlink planted at the target is replaced rather than followed.
 */
export function writePrivateFile(file: string, content: string): void {
  ensurePrivateDir(path.dirname(file));
  const tmp = `${file}.${process.pid}.${randomSecret(6)}.tmp`;
  const fd = fs.openSync(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
  try {
    fs.fchmodSync(fd, 0o600);
    fs.writeFileSync(fd, content);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

/** Reads a private file without following a symlink; undefined when it does not exist. */
export function readPrivateFile(file: string): string | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') {
      throw new FlintError('FLINT_ERR_CONFIG', `${file} is a symbolic link: credentials are not read through links; remove it`, { cause: err });
    }
    throw err;
  }
  try {
    return fs.readFileSync(fd, 'utf8');
  } finally {
    fs.closeSync(fd);
  }
}
