// Keep-alive connection pools to function instances, one per Unix socket
// (local mode) or host:port (kubernetes mode), reused across requests.
// Instances come and go, so pools of sockets that have vanished, or that no
// request used for a while, are closed by a sweep.
import fs from 'node:fs';
import { type Lease, WORKER_IDLE_KEEPALIVE_MS } from '../executor/types.ts';
import { type PoolTarget, WorkerPool } from './worker-client/pool.ts';

export interface UpstreamOptions {
  /** How often to look for pools to close. */
  sweepMs?: number;
  /** A pool unused for this long is closed even if its socket is still there. */
  idleCloseMs?: number;
}

interface Entry {
  readonly pool: WorkerPool;
  readonly socketPath: string | undefined;
  /** Set per request, cleared by the sweep: cheaper than a timestamp per request. */
  used: boolean;
  idleSweeps: number;
}

export class Upstreams {
  readonly #pools = new Map<string, Entry>();
  readonly #timer: NodeJS.Timeout;
  readonly #idleSweeps: number;

  constructor(opts: UpstreamOptions = {}) {
    const sweepMs = opts.sweepMs ?? 30_000;
    this.#idleSweeps = Math.max(1, Math.ceil((opts.idleCloseMs ?? 300_000) / sweepMs));
    this.#timer = setInterval(() => this.sweep(), sweepMs);
    this.#timer.unref();
  }

  get size(): number {
    return this.#pools.size;
  }

  /** The pool for a lease's instance; undefined when the lease names no address. */
  poolFor(lease: Lease): WorkerPool | undefined {
    const key = lease.socketPath ?? lease.address;
    if (key === undefined) return undefined;
    let e = this.#pools.get(key);
    if (e === undefined) {
      const socketPath = lease.socketPath;
      const target = socketPath !== undefined ? { socketPath } : parseAddress(key);
      if (target === undefined) return undefined;
      e = { pool: new WorkerPool(target, { maxIdleMs: WORKER_IDLE_KEEPALIVE_MS }), socketPath, used: true, idleSweeps: 0 };
      this.#pools.set(key, e);
    }
    e.used = true;
    return e.pool;
  }

  /** After a connection failure: drop the pool at once if its socket is gone. */
  forgetIfGone(lease: Lease): void {
    const key = lease.socketPath;
    if (key === undefined) return;
    fs.access(key, (err) => {
      if (!err) return;
      const e = this.#pools.get(key);
      if (e === undefined) return;
      this.#pools.delete(key);
      void e.pool.destroy().catch(() => {});
    });
  }

  sweep(): void {
    for (const [key, e] of this.#pools) {
      e.pool.closeExpired();
      if (e.used) {
        e.used = false;
        e.idleSweeps = 0;
        continue;
      }
      e.idleSweeps++;
      const gone = e.socketPath !== undefined && !fs.existsSync(e.socketPath);
      if (gone || e.idleSweeps >= this.#idleSweeps) {
        this.#pools.delete(key);
        // close() lets a long response still streaming on it finish.
        void e.pool.close().catch(() => {});
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((e) => e.pool.destroy().catch(() => {})));
  }
}

/** `host:port` or `[v6]:port`, as the executor's kubernetes backend gives addresses. */
function parseAddress(address: string): PoolTarget | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
  if (m === null) return undefined;
  return { host: m[1] ?? m[2], port: Number(m[3]) };
}
