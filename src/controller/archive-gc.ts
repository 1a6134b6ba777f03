// Archive garbage collection: an archive no package refers to is deleted once
// it is older than the grace period. The grace period covers the moments an
// archive legitimately has no package yet: between the CLI's upload and its
// package create, and between a build storing its output and recording it.
import type { Logger } from 'pino';
import type { ArchiveStore } from '../archive/index.ts';
import { archiveShas } from '../archive/refs.ts';
import type { Store } from '../store/store.ts';

export interface ArchiveGcOptions {
  store: Store;
  archives: ArchiveStore;
  graceMs: number;
  intervalMs: number;
  logger?: Logger;
}

export class ArchiveGc {
  readonly #o: ArchiveGcOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<string[]> | undefined;

  constructor(opts: ArchiveGcOptions) {
    this.#o = opts;
  }

  start(): void {
    this.#timer = setInterval(() => void this.collect().catch((err) => this.#o.logger?.error({ err }, 'archive garbage collection failed')), this.#o.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** One pass; returns the sha256 of every archive it deleted. */
  collect(): Promise<string[]> {
    this.#running ??= this.#collect().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #collect(): Promise<string[]> {
    const { store, archives, graceMs } = this.#o;
    const cutoff = Date.now() - graceMs;
    // Archives first, packages second: an archive stored after the listing is
    // not considered, and one referred to by a package created meanwhile is seen.
    const candidates = [];
    for await (const info of archives.list()) if (info.createdAt.getTime() <= cutoff) candidates.push(info);
    if (candidates.length === 0) return [];
    const used = new Set<string>();
    for (const p of (await store.list('Package')).items) {
      for (const sha of [...archiveShas(p.spec.source), ...archiveShas(p.spec.deployment)]) used.add(sha);
    }
    const deleted: string[] = [];
    for (const info of candidates) {
      if (used.has(info.sha256)) continue;
      if (await archives.delete(info.sha256)) deleted.push(info.sha256);
    }
    if (deleted.length > 0) this.#o.logger?.info({ archives: deleted.length }, 'unreferenced archives deleted');
    return deleted;
  }
}
