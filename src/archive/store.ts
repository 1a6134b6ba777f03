// The archive store interface: content-addressed bytes (by sha256). Local
// mode keeps them on disk (local-store.ts); one contract test
// (archive-store.contract.ts) runs against every implementation.
import type { Readable } from 'node:stream';

export interface ArchiveInfo {
  sha256: string;
  size: number;
  createdAt: Date;
}

export interface PutOptions {
  /** Refuse (FLINT_ERR_BAD_ARCHIVE) unless the bytes hash to this. */
  expectedSha256?: string;
  /** Refuse (FLINT_ERR_PAYLOAD_TOO_LARGE) past this many bytes. */
  maxBytes?: number;
  /** Runs on the complete bytes (a file) before they are kept; a rejection keeps nothing. */
  check?: (file: string) => Promise<void>;
}

export interface ArchiveStore {
  /** Streams `source` in, hashing as it goes; idempotent for the same content. Nothing is kept on refusal. */
  put(source: AsyncIterable<Uint8Array> | NodeJS.ReadableStream, opts?: PutOptions): Promise<ArchiveInfo>;
  putFile(file: string, opts?: PutOptions): Promise<ArchiveInfo>;
  get(sha256: string): Promise<ArchiveInfo | undefined>;
  /** Host path of the stored bytes. FLINT_ERR_NOT_FOUND when absent. */
  pathOf(sha256: string): Promise<string>;
  open(sha256: string): Promise<Readable>;
  delete(sha256: string): Promise<boolean>;
  list(): AsyncIterable<ArchiveInfo>;
}
