// Archives on local disk: `<root>/sha256/<2 hex>/<sha256>`. Bytes go to a
// temporary file in the same directory tree, are fsynced and checked, then
// renamed into place: a crash never leaves a half archive under its name.
import { isNoSpace, storageFull } from '../fsafe/no-space.ts';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { SHA256_HEX } from '../api/build-command.ts';
import { FlintError } from '../api/errors.ts';
import type { ArchiveInfo, ArchiveStore, PutOptions } from './store.ts';

const TEMP_MAX_AGE_MS = 60 * 60 * 1000;

function checkSha(sha: string): string {
  if (!SHA256_HEX.test(sha)) throw new FlintError('FLINT_ERR_VALIDATION', `'${sha}' is not a sha256 (64 lowercase hex digits)`);
  return sha;
}

export class LocalArchiveStore implements ArchiveStore {
  readonly #root: string;
  readonly #tmp: string;

  constructor(root: string) {
    this.#root = path.join(root, 'sha256');
    this.#tmp = path.join(root, 'tmp');
    fs.mkdirSync(root, { recursive: true, mode: 0o700 });
    fs.mkdirSync(this.#root, { recursive: true, mode: 0o700 });
    fs.mkdirSync(this.#tmp, { recursive: true, mode: 0o700 });
  }

  #file(sha: string): string {
    return path.join(this.#root, sha.slice(0, 2), sha);
  }

  async put(source: AsyncIterable<Uint8Array> | NodeJS.ReadableStream, opts: PutOptions = {}): Promise<ArchiveInfo> {
    if (opts.expectedSha256 !== undefined) checkSha(opts.expectedSha256);
    const tmp = path.join(this.#tmp, `${Date.now()}-${randomBytes(6).toString('hex')}`);
    const fd = await fs.promises.open(tmp, 'wx', 0o600);
    const hash = createHash('sha256');
    let size = 0;
    let keep = false;
    try {
      for await (const chunk of source as AsyncIterable<Uint8Array>) {
        const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        size += buf.length;
        if (opts.maxBytes !== undefined && size > opts.maxBytes) {
          throw new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `archive is larger than the limit of ${opts.maxBytes} bytes`);
        }
        hash.update(buf);
        await fd.write(buf);
      }
      await fd.sync();
      await fd.close();
      const sha = hash.digest('hex');
      if (opts.expectedSha256 !== undefined && sha !== opts.expectedSha256) {
        throw new FlintError('FLINT_ERR_BAD_ARCHIVE', `archive checksum mismatch: expected sha256 ${opts.expectedSha256}, got ${sha}`);
      }
      await opts.check?.(tmp);
      const final = this.#file(sha);
      await fs.promises.mkdir(path.dirname(final), { recursive: true, mode: 0o700 });
      const existing = await this.get(sha);
      if (existing) {
        // Stored again: young again, so garbage collection's grace period starts over.
        const now = new Date();
        await fs.promises.utimes(final, now, now);
        return { ...existing, createdAt: now };
      }
      await fs.promises.chmod(tmp, 0o400);
      await fs.promises.rename(tmp, final);
      keep = true;
      return { sha256: sha, size, createdAt: (await fs.promises.stat(final)).mtime };
    } catch (err) {
      if (isNoSpace(err)) throw storageFull(this.#root, err);
      throw err;
    } finally {
      await fd.close().catch(() => {});
      if (!keep) await fs.promises.rm(tmp, { force: true });
    }
  }

  async putFile(file: string, opts?: PutOptions): Promise<ArchiveInfo> {
    return this.put(fs.createReadStream(file), opts);
  }

  async get(sha256: string): Promise<ArchiveInfo | undefined> {
    checkSha(sha256);
    try {
      const st = await fs.promises.stat(this.#file(sha256));
      return { sha256, size: st.size, createdAt: st.mtime };
    } catch {
      return undefined;
    }
  }

  async pathOf(sha256: string): Promise<string> {
    if (!(await this.get(sha256))) throw new FlintError('FLINT_ERR_NOT_FOUND', `archive ${sha256} not found`);
    return this.#file(sha256);
  }

  async open(sha256: string): Promise<Readable> {
    return fs.createReadStream(await this.pathOf(sha256));
  }

  async delete(sha256: string): Promise<boolean> {
    checkSha(sha256);
    try {
      await fs.promises.unlink(this.#file(sha256));
      return true;
    } catch {
      return false;
    }
  }

  async *list(): AsyncIterable<ArchiveInfo> {
    for (const prefix of await fs.promises.readdir(this.#root)) {
      let names: string[];
      try {
        names = await fs.promises.readdir(path.join(this.#root, prefix));
      } catch {
        continue;
      }
      for (const name of names) {
        if (!SHA256_HEX.test(name)) continue;
        const info = await this.get(name);
        if (info) yield info;
      }
    }
  }

  /** Removes temporary files left by a crash mid-upload. */
  async sweepTemp(maxAgeMs = TEMP_MAX_AGE_MS): Promise<number> {
    let removed = 0;
    for (const name of await fs.promises.readdir(this.#tmp)) {
      const p = path.join(this.#tmp, name);
      const st = await fs.promises.stat(p).catch(() => undefined);
      if (st && Date.now() - st.mtimeMs > maxAgeMs) {
        await fs.promises.rm(p, { force: true });
        removed++;
      }
    }
    return removed;
  }
}
