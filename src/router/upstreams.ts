// Keep-alive connection pools to worker sockets, one per socket, closed when
// the socket has seen no use for a while (its worker is likely gone).
import { Pool } from 'undici';

const IDLE_CLOSE_MS = 5 * 60_000;

interface Upstream {
  pool: Pool;
  lastUsed: number;
}

export class Upstreams {
  readonly #pools = new Map<string, Upstream>();
  readonly #sweeper: NodeJS.Timeout;

  constructor() {
    this.#sweeper = setInterval(() => this.#sweep(), 60_000);
    this.#sweeper.unref();
  }

  get(socketPath: string): Pool {
    let u = this.#pools.get(socketPath);
    if (!u) {
      u = {
        pool: new Pool('http://localhost', {
          socketPath,
          connections: 64,
          pipelining: 1,
          keepAliveTimeout: 60_000,
          // functionTimeout bounds a call; undici's own timers must not.
          headersTimeout: 0,
          bodyTimeout: 0,
        }),
        lastUsed: 0,
      };
      this.#pools.set(socketPath, u);
    }
    u.lastUsed = Date.now();
    return u.pool;
  }

  #sweep(): void {
    const cutoff = Date.now() - IDLE_CLOSE_MS;
    for (const [k, u] of this.#pools) {
      if (u.lastUsed < cutoff) {
        this.#pools.delete(k);
        void u.pool.destroy().catch(() => {});
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
    await Promise.all([...this.#pools.values()].map((u) => u.pool.destroy().catch(() => {})));
    this.#pools.clear();
  }
}
