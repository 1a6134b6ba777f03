// Which new connections the router takes. Router, ingress and control plane
// share one process and one file-descriptor limit, so a flood of connections
// that never finish a request must fill the router's own share and stop
// there, never the process's. Two caps: the router's total, and one client
// address's share of it. At the total cap a new connection does not simply
// lose: the oldest connection with no request under way (an idle keep-alive
// one, or one whose head is still trickling in) makes room for it, since a
// connection doing nothing is the cheapest to lose and the likeliest to be a
// slow-header attacker. Only when every connection is answering a request is
// the newcomer closed.

/** Why a connection was closed by the caps, for the metrics. */
export type ConnectionDrop = 'max' | 'per_client' | 'evicted';

export interface ConnectionLimits {
  /** Open connections at most (0: no cap). */
  maxConnections: number;
  /** Open connections from one client address at most (0: no cap). */
  maxConnectionsPerClient: number;
}

/** What the caps need to know of a connection. */
export interface LimitedConnection {
  readonly clientAddress: string;
  /** A request is being answered on it: it is not closed to make room. */
  readonly answering: boolean;
}

/** How many of the oldest connections are looked at for one to close; bounded so a flood at the cap stays cheap. */
const EVICTION_SCAN = 256;

export class ConnectionAdmission<C extends LimitedConnection> {
  readonly #limits: ConnectionLimits;
  readonly #perClient = new Map<string, number>();
  readonly #onDrop: (why: ConnectionDrop) => void;

  constructor(limits: ConnectionLimits, onDrop: (why: ConnectionDrop) => void = () => {}) {
    this.#limits = limits;
    this.#onDrop = onDrop;
  }

  /**
   * Whether a connection from `address` may be taken, with `open` the
   * connections open now, oldest first. At the total cap, `evict` is handed
   * one of them that is doing nothing, to close and forget at once (so the
   * next newcomer does not pick it again).
   */
  admit(address: string, open: Set<C>, evict: (victim: C) => void): boolean {
    const { maxConnections, maxConnectionsPerClient } = this.#limits;
    if (maxConnectionsPerClient > 0 && (this.#perClient.get(address) ?? 0) >= maxConnectionsPerClient) {
      this.#onDrop('per_client');
      return false;
    }
    if (maxConnections > 0 && open.size >= maxConnections) {
      const victim = this.#oldestIdle(open);
      if (victim === undefined) {
        this.#onDrop('max');
        return false;
      }
      evict(victim);
      this.#onDrop('evicted');
    }
    return true;
  }

  opened(conn: C): void {
    this.#perClient.set(conn.clientAddress, (this.#perClient.get(conn.clientAddress) ?? 0) + 1);
  }

  closed(conn: C): void {
    const n = (this.#perClient.get(conn.clientAddress) ?? 1) - 1;
    if (n <= 0) this.#perClient.delete(conn.clientAddress);
    else this.#perClient.set(conn.clientAddress, n);
  }

  #oldestIdle(open: Set<C>): C | undefined {
    let looked = 0;
    for (const c of open) {
      if (!c.answering) return c;
      if (++looked >= EVICTION_SCAN) break;
    }
    return undefined;
  }
}
