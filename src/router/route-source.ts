// Keeps the route table in step with the store: list Functions and
// HTTPTriggers, then watch each kind from its list's resourceVersion so no
// change between list and watch is lost. Changes only mark the table stale;
// one rebuild runs per macrotask however many events arrived, and reuses
// what earlier builds compiled (templates per trigger version, per-function
// targets per function version).
import type { Logger } from 'pino';
import { isFlintError } from '../api/errors.ts';
import type { FunctionResource, HTTPTrigger } from '../api/kinds.ts';
import type { Store, Watch, WatchEvent } from '../store/store.ts';
import { buildTable, type CompiledTrigger, compileTrigger, resolveBackend, RouteTable } from './route-table.ts';
import { type Backend, FnTarget, functionKey } from './targets.ts';

const MAX_START_ATTEMPTS = 5;

export class RouteSource {
  readonly #store: Store;
  readonly #logger: Logger;
  readonly #functions = new Map<string, FunctionResource>();
  readonly #triggers = new Map<string, HTTPTrigger>();
  // Keyed by object: the store hands out a new object per version.
  readonly #compiled = new WeakMap<HTTPTrigger, CompiledTrigger | Error>();
  readonly #targets = new WeakMap<FunctionResource, FnTarget>();
  readonly #skipLogged = new WeakSet<HTTPTrigger>();
  #watches: Watch[] = [];
  #table: RouteTable = RouteTable.empty;
  #scheduled: NodeJS.Immediate | undefined;
  #stopped = false;
  #builds = 0;

  constructor(store: Store, logger: Logger) {
    this.#store = store;
    this.#logger = logger;
  }

  get table(): RouteTable {
    return this.#table;
  }

  /** How many tables were built so far. */
  get builds(): number {
    return this.#builds;
  }

  async start(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#listAndWatch();
        break;
      } catch (err) {
        // A write storm between list and watch can age the list out of the
        // store's history; listing again is the cure.
        if (!(isFlintError(err) && err.code === 'FLINT_ERR_GONE') || attempt >= MAX_START_ATTEMPTS) throw err;
      }
    }
    this.#rebuild();
  }

  async #listAndWatch(): Promise<void> {
    this.#closeWatches();
    const fns = await this.#store.list('Function');
    const trs = await this.#store.list('HTTPTrigger');
    this.#functions.clear();
    this.#triggers.clear();
    for (const f of fns.items) this.#functions.set(functionKey(f.metadata.namespace, f.metadata.name), f);
    for (const t of trs.items) this.#triggers.set(functionKey(t.metadata.namespace, t.metadata.name), t);
    this.#watches.push(this.#store.watch({ kind: 'Function', sinceResourceVersion: fns.resourceVersion }, (ev) => this.#onEvent(ev)));
    this.#watches.push(this.#store.watch({ kind: 'HTTPTrigger', sinceResourceVersion: trs.resourceVersion }, (ev) => this.#onEvent(ev)));
  }

  #onEvent(ev: WatchEvent): void {
    const o = ev.object;
    const map = (o.kind === 'Function' ? this.#functions : this.#triggers) as Map<string, typeof o>;
    const key = functionKey(o.metadata.namespace, o.metadata.name);
    if (ev.type === 'DELETED') map.delete(key);
    else map.set(key, o);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled !== undefined || this.#stopped) return;
    this.#scheduled = setImmediate(() => {
      this.#scheduled = undefined;
      this.#rebuild();
    });
  }

  #rebuild(): void {
    const targets = new Map<string, FnTarget>();
    for (const [key, fn] of this.#functions) {
      let t = this.#targets.get(fn);
      if (t === undefined) {
        t = new FnTarget(fn);
        this.#targets.set(fn, t);
      }
      targets.set(key, t);
    }
    const routes: Array<{ compiled: CompiledTrigger; backend: Backend }> = [];
    for (const ht of this.#triggers.values()) {
      let c = this.#compiled.get(ht);
      if (c === undefined) {
        try {
          c = compileTrigger(ht);
        } catch (err) {
          c = err as Error;
          this.#logger.warn({ trigger: functionKey(ht.metadata.namespace, ht.metadata.name), err: c.message }, 'route skipped: bad path template');
        }
        this.#compiled.set(ht, c);
      }
      if (c instanceof Error) continue;
      const backend = resolveBackend(ht, targets);
      if (backend === undefined) {
        if (!this.#skipLogged.has(ht)) {
          this.#skipLogged.add(ht);
          this.#logger.info({ trigger: c.id }, 'route skipped until the function it names exists');
        }
        continue;
      }
      routes.push({ compiled: c, backend });
    }
    this.#table = buildTable(routes, targets);
    this.#builds++;
  }

  #closeWatches(): void {
    for (const w of this.#watches) w.close();
    this.#watches = [];
  }

  stop(): void {
    this.#stopped = true;
    if (this.#scheduled !== undefined) clearImmediate(this.#scheduled);
    this.#scheduled = undefined;
    this.#closeWatches();
  }
}
