// The router's executor in kubernetes mode (role router): the executor
// leader's grants, cached. A request takes an idle grant of its function if
// the router holds one (no network hop: the warm path), else asks the
// leader for one. A grant goes back to the leader when it has been idle for
// GRANT_IDLE_MS (so instances can be reaped and other routers use them),
// when a request on it failed (the executor replaces the instance), or once
// the leader revoked it (its instance drains). While no leader answers (a
// failover), requests keep using the grants held: warm functions keep
// answering; only calls that need a new grant wait for the new leader, who
// is then handed the grants still in use (reattach).
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { FunctionResource } from '../../api/kinds.ts';
import type { Executor, Lease } from '../types.ts';
import { type ExecutorEvent, type GrantAnswer, type GrantOp, HEARTBEAT_MS } from './protocol.ts';
import type { ExecutorServiceClient } from './service-client.ts';

/** How long a router keeps a grant nobody uses. Long enough to carry steady traffic, short next to a function's idletimeout (120 s). */
export const GRANT_IDLE_MS = 10_000;
const RECONNECT_MS = 250;

interface Grant {
  /** Changes when a new leader takes the grant over. */
  id: string;
  readonly key: string;
  fn: FunctionResource;
  readonly address: string;
  readonly socketPath?: string;
  readonly instanceId: string;
  /** The leader and the router's session there that issued it (termOf): grant ids mean nothing to another. */
  term: string;
  busy: boolean;
  revoked: boolean;
  lastUsed: number;
  /** How its request ended, when that was while a new leader was taking the grant over (the answer settles it). */
  endedWith?: Outcome;
}

type Outcome = 'ok' | 'unreachable' | 'timeout';

interface LocalWaiter {
  resolve(lease: Lease): void;
  /** Cancels its request to the leader: a grant freed here served it first. */
  readonly ask: AbortController;
}

interface FunctionGrants {
  uid: string;
  /** Requests waiting for the leader's answer: a grant freed here meanwhile goes to the oldest. */
  readonly waiting: LocalWaiter[];
  /** Idle grants, most recently used last (reused first: its connections are warm). */
  readonly idle: Grant[];
  readonly all: Set<Grant>;
}

export interface RemoteExecutorOptions {
  client: ExecutorServiceClient;
  logger: Logger;
  /** This router's id at the leader (one per process). */
  routerId?: string;
  /** GRANT_IDLE_MS unless set (tests). */
  grantIdleMs?: number;
}

export class RemoteExecutor implements Executor {
  readonly #o: RemoteExecutorOptions;
  readonly #router: string;
  readonly #fns = new Map<string, FunctionGrants>();
  readonly #byId = new Map<string, Grant>();
  #ops: GrantOp[] = [];
  #flushing = false;
  #leader = '';
  /** The leader and this router's session there, as the event stream last said. */
  #term = '';
  #stopped = false;
  #events: AbortController | undefined;
  #loop: Promise<void> | undefined;
  #idleSweep: NodeJS.Timeout | undefined;

  constructor(o: RemoteExecutorOptions) {
    this.#o = o;
    this.#router = o.routerId ?? randomUUID();
  }

  get #idleMs(): number {
    return this.#o.grantIdleMs ?? GRANT_IDLE_MS;
  }

  async start(): Promise<void> {
    this.#loop = this.#followEvents();
    // Checked a few times per idle period, at most once a second.
    this.#idleSweep = setInterval(() => this.#releaseIdle(), Math.max(10, Math.min(1000, Math.floor(this.#idleMs / 4))));
    this.#idleSweep.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#idleSweep);
    for (const g of [...this.#byId.values()]) if (!g.busy) this.#giveBack(g, 'ok');
    await this.#flush().catch(() => {});
    this.#events?.abort();
    await this.#loop;
  }

  /** Grants held, for tests and metrics. */
  held(): { grants: number; busy: number; leader: string } {
    let busy = 0;
    for (const g of this.#byId.values()) if (g.busy) busy++;
    return { grants: this.#byId.size, busy, leader: this.#leader };
  }

  tryAcquire(fn: FunctionResource): Lease | undefined {
    const fg = this.#grantsOf(fn);
    for (;;) {
      const g = fg.idle.pop();
      if (!g) return undefined;
      // Revoked, or granted for an older definition of the function (the leader may not have revoked it yet): the
      // request goes to the leader, so nothing is served by old code once the router knows of new.
      if (g.revoked || Number(fn.metadata.resourceVersion) > Number(g.fn.metadata.resourceVersion)) {
        this.#giveBack(g, 'ok');
        continue;
      }
      return this.#use(g, false);
    }
  }

  acquire(fn: FunctionResource, signal?: AbortSignal): Promise<Lease> {
    const warm = this.tryAcquire(fn);
    if (warm) return Promise.resolve(warm);
    const fg = this.#grantsOf(fn);
    const ask = new AbortController();
    const onAbort = () => ask.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    return new Promise<Lease>((resolve, reject) => {
      let settled = false;
      const waiter: LocalWaiter = {
        ask,
        resolve: (lease) => {
          settled = true;
          resolve(lease);
        },
      };
      fg.waiting.push(waiter);
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        const i = fg.waiting.indexOf(waiter);
        if (i >= 0) fg.waiting.splice(i, 1);
      };
      const id = randomUUID();
      this.#o.client.acquire({ router: this.#router, fn, grant: id }, ask.signal).then(
        (answer) => {
          done();
          const g = this.#adopt(fn, answer);
          if (settled) {
            // Served by a grant freed here first: this one joins the cache.
            this.#idle(g);
            return;
          }
          settled = true;
          resolve(this.#use(g, answer.coldStart));
        },
        (err) => {
          done();
          // Given up (a grant freed here served it, or the caller went): the leader may have granted it all the
          // same, its answer on the way and now unread. The id goes back; the leader ignores it if it granted nothing.
          if (ask.signal.aborted) this.#queue({ grant: id, op: 'release', outcome: 'ok' });
          if (!settled) reject(err);
        },
      );
    });
  }

  /** A grant free again: the oldest request waiting for the leader takes it, else the cache keeps it. */
  #idle(g: Grant): void {
    const fg = this.#fns.get(g.key);
    if (!fg) return;
    const waiter = fg.waiting.shift();
    if (waiter) {
      waiter.resolve(this.#use(g, false));
      waiter.ask.abort();
    } else fg.idle.push(g);
  }

  #grantsOf(fn: FunctionResource): FunctionGrants {
    const key = `${fn.metadata.namespace}/${fn.metadata.name}`;
    let fg = this.#fns.get(key);
    if (fg && fg.uid !== fn.metadata.uid) {
      // A new function of the same name: the old one's grants are for instances about to go.
      for (const g of fg.idle.splice(0)) this.#giveBack(g, 'ok');
      for (const g of fg.all) g.revoked = true;
      fg = undefined;
    }
    if (!fg) {
      fg = { uid: fn.metadata.uid, idle: [], all: new Set(), waiting: [] };
      this.#fns.set(key, fg);
    }
    return fg;
  }

  #adopt(fn: FunctionResource, a: GrantAnswer): Grant {
    const fg = this.#grantsOf(fn);
    const g: Grant = { id: a.grant, key: `${fn.metadata.namespace}/${fn.metadata.name}`, fn, address: a.address, socketPath: a.socketPath, instanceId: a.instanceId, term: termOf(a), busy: false, revoked: false, lastUsed: Date.now() };
    fg.all.add(g);
    this.#byId.set(g.id, g);
    return g;
  }

  #use(g: Grant, coldStart: boolean): Lease {
    g.busy = true;
    let released = false;
    return {
      address: g.address || undefined,
      socketPath: g.socketPath,
      instanceId: g.instanceId,
      coldStart,
      stale: () => g.revoked,
      markLongLived: () => this.#queue({ grant: g.id, op: 'longLived' }),
      release: (outcome = 'ok') => {
        if (released) return;
        released = true;
        g.busy = false;
        g.lastUsed = Date.now();
        if (this.#byId.get(g.id) === g) this.#settle(g, outcome);
        // Not in the cache while a new leader is asked to take it over: its answer settles it, with this outcome.
        else g.endedWith = outcome;
      },
    };
  }

  /** A request on the grant ended: it is kept for the next, or given back. */
  #settle(g: Grant, outcome: Outcome): void {
    // onceOnly: the executor retires the instance after each request, so the grant is not kept.
    if (outcome !== 'ok' || g.revoked || this.#stopped || g.fn.spec.onceOnly) this.#giveBack(g, outcome);
    else this.#idle(g);
  }

  #giveBack(g: Grant, outcome: Outcome): void {
    if (!this.#forget(g)) return;
    this.#queue({ grant: g.id, op: 'release', outcome });
  }

  #queue(op: GrantOp): void {
    this.#ops.push(op);
    if (!this.#flushing) setImmediate(() => void this.#flush().catch((err) => this.#o.logger.warn({ err: err.message }, 'giving grants back to the executor failed')));
    this.#flushing = true;
  }

  /** One request for every grant op queued since the last: a burst of releases costs one round trip. */
  async #flush(): Promise<void> {
    const ops = this.#ops;
    this.#ops = [];
    this.#flushing = false;
    if (ops.length === 0) return;
    // A leader that died took these grants with it; the new one never knew them.
    await this.#o.client.grants({ router: this.#router, ops });
  }

  #releaseIdle(): void {
    const cutoff = Date.now() - this.#idleMs;
    for (const fg of [...this.#fns.values()]) {
      for (const g of [...fg.idle]) if (g.lastUsed < cutoff) this.#giveBack(g, 'ok');
    }
  }

  /** The leader's event stream: revocations, and who leads (a new one gets the grants still in use). */
  async #followEvents(): Promise<void> {
    while (!this.#stopped) {
      this.#events = new AbortController();
      const ac = this.#events;
      let silence: NodeJS.Timeout | undefined;
      const quiet = () => {
        clearTimeout(silence);
        // A leader that stopped without closing the stream (killed, partitioned) says nothing: go and find the next.
        silence = setTimeout(() => ac.abort(), HEARTBEAT_MS * 3);
      };
      try {
        const { body } = await this.#o.client.events(this.#router, ac.signal);
        quiet();
        let rest = '';
        const decoder = new TextDecoder();
        for await (const chunk of body) {
          quiet();
          rest += decoder.decode(chunk, { stream: true });
          for (let nl = rest.indexOf('\n'); nl >= 0; nl = rest.indexOf('\n')) {
            const line = rest.slice(0, nl);
            rest = rest.slice(nl + 1);
            if (line) await this.#onEvent(JSON.parse(line) as ExecutorEvent);
          }
        }
      } catch (err) {
        if (!this.#stopped && !ac.signal.aborted) this.#o.logger.debug({ err: (err as Error).message }, 'executor event stream ended');
      } finally {
        clearTimeout(silence);
      }
      if (!this.#stopped) await new Promise((r) => setTimeout(r, RECONNECT_MS));
    }
  }

  async #onEvent(ev: ExecutorEvent): Promise<void> {
    if ('revoke' in ev) {
      for (const id of ev.revoke) {
        const g = this.#byId.get(id);
        if (!g) continue;
        g.revoked = true;
        if (!g.busy) this.#giveBack(g, 'ok');
      }
    } else if ('leader' in ev && termOf(ev) !== this.#term) {
      const previous = this.#leader;
      this.#leader = ev.leader;
      this.#term = termOf(ev);
      // Grants of another leader are handed over: the one before, or one that answered before this stream first did;
      // so are those of an earlier session at this leader (the router was gone past the grace: they were given back).
      for (const g of this.#byId.values()) {
        if (g.term === this.#term) continue;
        await this.#reattach(previous);
        break;
      }
    }
  }

  /** A new leader: the grants in use are handed to it; idle ones of other leaders are dropped (the new one hands out its own). */
  async #reattach(previous: string): Promise<void> {
    const leader = this.#leader;
    const term = this.#term;
    const old = [...this.#byId.values()].filter((g) => g.term !== term);
    for (const g of old) this.#forget(g);
    this.#ops = this.#ops.filter((op) => this.#byId.has(op.grant));
    const busy = old.filter((g) => g.busy);
    this.#o.logger.info({ previous, leader, busy: busy.length, dropped: old.length - busy.length }, 'a new executor leader: handing it the grants in use');
    if (busy.length === 0) return;
    let answers: Array<GrantAnswer | null> = [];
    try {
      answers = (await this.#o.client.reattach({ router: this.#router, grants: busy.map((g) => ({ fn: g.fn, instanceId: g.instanceId })) })).grants;
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message }, 'could not hand grants to the new executor leader: they are dropped as their requests end');
    }
    busy.forEach((g, i) => {
      const a = answers[i];
      if (!a) {
        // The new leader has no room on that instance for this router: the request under way finishes, then it is dropped.
        g.revoked = true;
        return;
      }
      g.id = a.grant;
      g.term = termOf(a);
      this.#byId.set(g.id, g);
      this.#grantsOf(g.fn).all.add(g);
      // Its request may have ended while the new leader answered.
      if (!g.busy) this.#settle(g, g.endedWith ?? 'ok');
      g.endedWith = undefined;
    });
  }

  /** Out of the cache, without telling any leader. */
  #forget(g: Grant): boolean {
    if (!this.#byId.delete(g.id)) return false;
    const fg = this.#fns.get(g.key);
    if (fg) {
      fg.all.delete(g);
      const i = fg.idle.indexOf(g);
      if (i >= 0) fg.idle.splice(i, 1);
      if (fg.all.size === 0) this.#fns.delete(g.key);
    }
    return true;
  }
}

/** Who issued a grant: a leader, and the router's session there (older leaders name none). */
function termOf(a: { leader: string; session?: string }): string {
  return a.session === undefined ? a.leader : `${a.leader}/${a.session}`;
}
