// The data directory holds the database (with the router's signing key in
// it), the admin token and every function's code and logs. Its modes are
// made private at every start, not only when the server creates it: an
// operator may have made it beforehand (mkdir gives 0755 under the usual
// umask), and SQLite creates the database and its WAL with the umask's mode,
// so without this step any local user could read the signing key and mint
// tokens.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FlintError } from '../api/errors.ts';
import type { DataLayout } from '../config/layout.ts';

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

function userName(uid: number): string {
  try {
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const f = line.split(':');
      if (f.length > 2 && Number(f[2]) === uid) return `${f[0]} (uid ${uid})`;
    }
  } catch {}
  return `uid ${uid}`;
}

function tighten(p: string, st: fs.Stats, mode: number): void {
  if ((st.mode & 0o7777) !== mode) fs.chmodSync(p, mode);
}

/** The database and the files SQLite keeps beside it. */
export function databaseFiles(layout: DataLayout): string[] {
  return [layout.db, `${layout.db}-wal`, `${layout.db}-shm`, `${layout.db}-journal`];
}

function lstatOrUndefined(p: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Everything under `dir` owner-only: directories 0700, files 0600. Links are
 * not followed (and not chmod'ed: chmod would act on their target).
 */
function privateTree(dir: string): void {
  const st = lstatOrUndefined(dir);
  if (!st?.isDirectory()) return;
  tighten(dir, st, DIR_MODE);
  for (const name of fs.readdirSync(dir)) {
    const p = path.join(dir, name);
    const s = fs.lstatSync(p);
    if (s.isDirectory()) privateTree(p);
    else if (s.isFile()) tighten(p, s, FILE_MODE);
  }
}

/** The database files 0600; a link in their place is refused (SQLite would follow it). */
export function privateDatabaseFiles(layout: DataLayout): void {
  for (const f of databaseFiles(layout)) {
    const st = lstatOrUndefined(f);
    if (!st) continue;
    if (!st.isFile()) {
      throw new FlintError('FLINT_ERR_CONFIG', `${f} is not a regular file (${st.isSymbolicLink() ? 'a symbolic link' : 'something else'}): the server keeps its database there and will not open it; remove it and start again`, {
        field: 'dataDir',
      });
    }
    tighten(f, st, FILE_MODE);
  }
}

/**
 * Makes the data directory private before anything is opened in it: the
 * directory 0700 (created so if missing), the database files and everything
 * under `private/` owner-only, and the database created 0600 when new so its
 * WAL and SHM, which SQLite creates with the database's mode, are too.
 * Refuses a directory owned by another user: whoever owns it can swap any
 * file in it, so nothing the server keeps there would be private.
 */
export function makeDataDirPrivate(layout: DataLayout, opts: { createDatabase: boolean }): void {
  fs.mkdirSync(layout.root, { recursive: true, mode: DIR_MODE });
  const st = fs.statSync(layout.root);
  if (!st.isDirectory()) throw new FlintError('FLINT_ERR_CONFIG', `the data directory ${layout.root} is not a directory`, { field: 'dataDir' });
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    throw new FlintError(
      'FLINT_ERR_CONFIG',
      `the data directory ${layout.root} belongs to ${userName(st.uid)}, not to ${os.userInfo().username} (uid ${uid}) who runs the server: ` +
        'its owner could read or replace the database and credentials in it. Start the server as its owner, chown it, or choose another dataDir',
      { field: 'dataDir' },
    );
  }
  tighten(layout.root, st, DIR_MODE);
  privateDatabaseFiles(layout);
  if (opts.createDatabase && !lstatOrUndefined(layout.db)) {
    // O_EXCL: if something appears here in between, we do not adopt it.
    fs.closeSync(fs.openSync(layout.db, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, FILE_MODE));
  }
  fs.mkdirSync(layout.private, { recursive: true, mode: DIR_MODE });
  privateTree(layout.private);
}
