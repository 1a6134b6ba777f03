// `mkdir -p` below a root without following links: each component below the
// root is made with mkdir (which never follows a link at its last component)
// or, when it exists, checked with lstat to be a real directory owned by
// this process. The root itself is the administrator's (a data directory
// may well be a link to a bigger disk); below it only the server's own
// directories are trusted.
import fs from 'node:fs';
import path from 'node:path';
import { unsafePath } from './open.ts';

const uid = process.getuid?.();

/** Refuses `dir` unless lstat shows a real directory owned by us. */
export function checkOwnDirectory(dir: string, st: fs.Stats = fs.lstatSync(dir)): void {
  if (st.isSymbolicLink()) throw unsafePath(dir, 'it is a symbolic link');
  if (!st.isDirectory()) throw unsafePath(dir, 'it is not a directory');
  if (uid !== undefined && st.uid !== uid) throw unsafePath(dir, `it belongs to uid ${st.uid}, not to this server (${uid})`);
}

/**
 * Makes `root/rel` and every directory between, returning its path. `rel`
 * is relative, with no `..`; an existing component that is a link, not a
 * directory, or someone else's is refused (FLINT_ERR_UNSAFE_PATH).
 */
export function mkdirUnder(root: string, rel: string, mode = 0o755): string {
  const parts = rel.split('/').filter((p) => p !== '' && p !== '.');
  if (path.isAbsolute(rel) || parts.includes('..')) throw unsafePath(path.join(root, rel), 'the path leaves its root');
  fs.mkdirSync(root, { recursive: true, mode });
  let at = path.resolve(root);
  if (!fs.statSync(at).isDirectory()) throw unsafePath(at, 'it is not a directory');
  for (const part of parts) {
    at = path.join(at, part);
    let st = fs.lstatSync(at, { throwIfNoEntry: false });
    if (!st) {
      try {
        fs.mkdirSync(at, mode);
      } catch (err) {
        // Made meanwhile by someone else: whatever it is, the lstat below judges it.
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      st = fs.lstatSync(at);
    }
    checkOwnDirectory(at, st);
  }
  return at;
}
