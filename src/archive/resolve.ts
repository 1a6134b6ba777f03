// From a package's archive reference to bytes on this machine. Every archive
// ends up in the content-addressed store: an embedded literal is put there
// (idempotent, so the same code is stored once), a stored archive is already
// there, and an http(s) URL is downloaded into it, its checksum checked when
// the package gives one.
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { storedArchiveSha } from '../api/build-command.ts';
import { FlintError } from '../api/errors.ts';
import type { Archive } from '../api/kinds.ts';
import type { ArchiveInfo, ArchiveStore } from './store.ts';

export interface ResolvedArchive {
  sha256: string;
  /** Host path of the bytes. */
  path: string;
}

export interface ResolveOptions {
  /** Largest download accepted for a URL archive. */
  maxBytes?: number;
}

// URL archives without a checksum are fetched once per process: the content
// behind a URL may change, and the package gives no way to tell, so a new
// server process fetches it again.
const fetchedUrls = new Map<string, string>();

async function download(store: ArchiveStore, url: string, expected: string | undefined, opts: ResolveOptions): Promise<ArchiveInfo> {
  let res: Response;
  try {
    res = await fetch(url, { redirect: 'follow', signal: AbortSignal.timeout(10 * 60_000) });
  } catch (err) {
    throw new FlintError('FLINT_ERR_BAD_ARCHIVE', `cannot download archive ${url}: ${(err as Error).cause ? String((err as Error & { cause: Error }).cause.message) : (err as Error).message}`);
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel();
    throw new FlintError('FLINT_ERR_BAD_ARCHIVE', `cannot download archive ${url}: the server answered ${res.status}`);
  }
  return store.put(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>), { expectedSha256: expected, maxBytes: opts.maxBytes });
}

/** A literal archive's bytes, checked against the package's checksum when it gives one. */
export function literalBytes(archive: Archive): { bytes: Buffer; sha: string } {
  const bytes = Buffer.from(archive.literal ?? '', 'base64');
  const sha = createHash('sha256').update(bytes).digest('hex');
  const expected = archive.checksum?.sum;
  if (expected && sha !== expected) throw new FlintError('FLINT_ERR_BAD_ARCHIVE', `archive checksum mismatch: expected sha256 ${expected}, got ${sha}`);
  return { bytes, sha };
}

/** A literal's bytes in the store, once per content. */
export async function storeLiteral(store: ArchiveStore, literal: { bytes: Buffer; sha: string }): Promise<ResolvedArchive> {
  const { bytes, sha } = literal;
  // Stored already (every cold start of this code asks): no write, no fsync.
  if (!(await store.get(sha))) await store.put(Readable.from([bytes]), { expectedSha256: sha });
  return { sha256: sha, path: await store.pathOf(sha) };
}

export async function resolveArchive(store: ArchiveStore, archive: Archive, opts: ResolveOptions = {}): Promise<ResolvedArchive> {
  const expected = archive.checksum?.sum;
  if (archive.type === 'literal') return storeLiteral(store, literalBytes(archive));
  const url = archive.url ?? '';
  const stored = storedArchiveSha(url);
  if (stored) {
    if (!(await store.get(stored))) throw new FlintError('FLINT_ERR_NOT_FOUND', `archive ${stored} is not in the archive store (was it uploaded to this server?)`);
    return { sha256: stored, path: await store.pathOf(stored) };
  }
  const known = expected ?? fetchedUrls.get(url);
  if (known && (await store.get(known))) return { sha256: known, path: await store.pathOf(known) };
  const info = await download(store, url, expected, opts);
  if (!expected) fetchedUrls.set(url, info.sha256);
  return { sha256: info.sha256, path: await store.pathOf(info.sha256) };
}
