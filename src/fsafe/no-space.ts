// A write that failed because the filesystem is full, told apart from other
// failures so the caller can say so (507, "no space left") instead of an
// internal error: a full disk is the operator's to fix, and nothing of the
// refused write is kept.
import { FlintError } from '../api/errors.ts';

/** ENOSPC or EDQUOT from fs, or SQLITE_FULL (13) from node:sqlite. */
export function isNoSpace(err: unknown): boolean {
  const e = err as { code?: unknown; errcode?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  return e.code === 'ENOSPC' || e.code === 'EDQUOT' || (e.code === 'ERR_SQLITE_ERROR' && e.errcode === 13);
}

export function storageFull(where: string, cause: unknown): FlintError {
  return new FlintError('FLINT_ERR_STORAGE_FULL', `no space left on the filesystem of the data directory (${where}): nothing was written; free some space and try again`, { cause });
}
