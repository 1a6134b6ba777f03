// Kubernetes mode's Store: objects are custom resources (charts/flint/crds)
// and the cluster's own Secrets and ConfigMaps; resourceVersions are the API
// server's. Reads and writes go straight to the API server, so a write is
// visible to the next read. Watches are served from one informer per kind,
// started when the store opens, and from a log of their recent changes, so
// many watchers cost one stream per kind and a watch can resume from any
// version the log still holds.
import { FlintError } from '../api/errors.ts';
import { type AnyResource, KIND_NAMES, KINDS, type KindMap, type KindName } from '../api/kinds.ts';
import { Informer } from './kube-informer.ts';
import { KubeApiError, type KubeClient, type KubeObject } from './kube-client.ts';
import { fromKube, gvrOf, isCoreKind, toKube } from './kube-objects.ts';
import {
  type DeleteOptions,
  type ListOptions,
  type ListResult,
  parseLabelSelector,
  SelectorError,
  type Store,
  type Watch,
  type WatchEvent,
  type WatchEventType,
  type WatchOptions,
} from './store.ts';
import { WatchHub } from './watch-hub.ts';

export interface KubeStoreOptions {
  client: KubeClient;
  /** Changes kept for watches to resume from, across kinds. */
  eventRetention?: number;
  /** How long one watch stream lasts before the informer watches again. */
  watchTimeoutSeconds?: number;
  retryDelayMs?: number;
  onError?: (err: unknown, kind: KindName) => void;
  /**
   * The kinds to follow (watch) for this process; every kind unless set. A
   * router follows only functions and routes, so its ServiceAccount needs
   * no list or watch on anything else. Get, list and writes go to the API
   * server for any kind.
   */
  follow?: readonly KindName[];
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

function where(kind: KindName, ns: string, name: string): string {
  return `${kind} '${name}' in namespace '${ns}'`;
}

/** The API server's answer as the error the sqlite store gives for the same case. */
function translate(err: unknown, kind: KindName, ns: string, name: string): unknown {
  if (!(err instanceof KubeApiError)) return err;
  switch (err.code) {
    case 'FLINT_ERR_ALREADY_EXISTS':
      return new FlintError('FLINT_ERR_ALREADY_EXISTS', `${kind} '${name}' already exists in namespace '${ns}'`, { field: 'metadata.name' });
    case 'FLINT_ERR_CONFLICT':
      return new FlintError('FLINT_ERR_CONFLICT', `${where(kind, ns, name)} was modified: get it again and retry`, { field: 'metadata.resourceVersion' });
    case 'FLINT_ERR_NOT_FOUND':
      // A missing namespace answers 404 too; the API server's message says which.
      return new FlintError('FLINT_ERR_NOT_FOUND', `${kind} '${name}' not found in namespace '${ns}' (${err.message})`);
    default:
      return err;
  }
}

export class KubeStore implements Store {
  readonly #o: KubeStoreOptions;
  readonly #client: KubeClient;
  readonly #hub = new WatchHub();
  readonly #informers = new Map<KindName, Informer<AnyResource>>();
  /** Recent changes of every kind, in arrival order. */
  #log: Array<[number, WatchEvent]> = [];
  /** Per kind, the newest version the log can no longer replay from. */
  readonly #floor = new Map<KindName, number>();
  #closed = false;

  constructor(o: KubeStoreOptions) {
    this.#o = o;
    this.#client = o.client;
  }

  async start(): Promise<void> {
    await Promise.all(
      this.#followed().map(async (kind) => {
        const informer = new Informer<AnyResource>({
          client: this.#client,
          gvr: gvrOf(kind),
          convert: (o) => fromKube(kind, o),
          watchTimeoutSeconds: this.#o.watchTimeoutSeconds,
          retryDelayMs: this.#o.retryDelayMs,
          onChange: (rv, type, object) => this.#publish(rv, type, object),
          onResync: (rv) => this.#floor.set(kind, Math.max(this.#floor.get(kind) ?? 0, rv)),
          onError: (err) => this.#o.onError?.(err, kind),
        });
        this.#informers.set(kind, informer);
        this.#floor.set(kind, await informer.start());
      }),
    );
  }

  #followed(): readonly KindName[] {
    return this.#o.follow ?? KIND_NAMES;
  }

  #publish(rv: number, type: WatchEventType, object: AnyResource): void {
    const ev: WatchEvent = { type, object };
    this.#log.push([rv, ev]);
    const retention = this.#o.eventRetention ?? 10_000;
    if (this.#log.length > retention) {
      for (const [droppedRv, dropped] of this.#log.splice(0, this.#log.length - retention)) {
        const k = dropped.object.kind;
        this.#floor.set(k, Math.max(this.#floor.get(k) ?? 0, droppedRv));
      }
    }
    this.#hub.publish(rv, structuredClone(ev));
  }

  #check(): void {
    if (this.#closed) throw new FlintError('FLINT_ERR_UNAVAILABLE', 'store is closed');
  }

  async get<K extends KindName>(kind: K, namespace: string, name: string): Promise<KindMap[K] | undefined> {
    this.#check();
    const k = await this.#client.get<KubeObject>(gvrOf(kind), namespace, name);
    return k ? fromKube<KindMap[K]>(kind, k) : undefined;
  }

  async list<K extends KindName>(kind: K, opts: ListOptions = {}): Promise<ListResult<KindMap[K]>> {
    this.#check();
    if (opts.labelSelector) {
      try {
        parseLabelSelector(opts.labelSelector);
      } catch (err) {
        if (err instanceof SelectorError) throw new FlintError('FLINT_ERR_VALIDATION', err.message, { field: 'labelSelector' });
        throw err;
      }
    }
    const list = await this.#client.list<KubeObject>(gvrOf(kind), opts.namespace, { labelSelector: opts.labelSelector });
    return { items: list.items.map((k) => fromKube<KindMap[K]>(kind, k)), resourceVersion: list.metadata.resourceVersion ?? '0' };
  }

  async create<T extends AnyResource>(input: T): Promise<T> {
    this.#check();
    const { kind } = input;
    const ns = input.metadata.namespace ?? 'default';
    const name = input.metadata.name;
    const obj = { ...input, metadata: { ...input.metadata, namespace: ns, resourceVersion: undefined } } as T;
    let created: T;
    try {
      created = fromKube<T>(kind, await this.#client.create(gvrOf(kind), ns, toKube(obj, 1)));
    } catch (err) {
      throw translate(err, kind, ns, name);
    }
    const status = (input as { status?: Record<string, unknown> }).status;
    if (KINDS[kind].hasStatus && status && Object.keys(status).length > 0) return this.updateStatus({ ...created, status } as T);
    return created;
  }

  async update<T extends AnyResource>(input: T): Promise<T> {
    this.#check();
    const { kind } = input;
    const ns = input.metadata.namespace ?? 'default';
    const name = input.metadata.name;
    try {
      let generation: number | undefined;
      let resourceVersion = input.metadata.resourceVersion;
      if (isCoreKind(kind)) {
        // The API server keeps no generation for these: compare with what is stored, and write only over that version.
        const current = await this.get(kind, ns, name);
        if (!current) throw new FlintError('FLINT_ERR_NOT_FOUND', `${kind} '${name}' not found in namespace '${ns}'`);
        if (resourceVersion !== undefined && resourceVersion !== current.metadata.resourceVersion) {
          throw new FlintError('FLINT_ERR_CONFLICT', `${where(kind, ns, name)} was modified: get it again and retry`, { field: 'metadata.resourceVersion' });
        }
        const changed = !sameJson((input as { data?: unknown }).data, (current as { data?: unknown }).data);
        generation = current.metadata.generation + (changed ? 1 : 0);
        resourceVersion = current.metadata.resourceVersion;
      }
      const obj = { ...input, metadata: { ...input.metadata, namespace: ns, resourceVersion } } as T;
      const updated = fromKube<T>(kind, await this.#client.replace(gvrOf(kind), ns, name, toKube(obj, generation)));
      const status = (input as { status?: unknown }).status;
      if (KINDS[kind].hasStatus && status !== undefined && !sameJson(status, (updated as { status?: unknown }).status)) {
        return this.updateStatus({ ...updated, status } as T);
      }
      return updated;
    } catch (err) {
      throw translate(err, kind, ns, name);
    }
  }

  async updateStatus<T extends AnyResource>(input: T): Promise<T> {
    this.#check();
    const { kind } = input;
    const ns = input.metadata.namespace ?? 'default';
    const name = input.metadata.name;
    if (!KINDS[kind].hasStatus) throw new FlintError('FLINT_ERR_VALIDATION', `${kind} has no status`);
    try {
      return fromKube<T>(kind, await this.#client.replaceStatus(gvrOf(kind), ns, name, toKube({ ...input, metadata: { ...input.metadata, namespace: ns } } as T)));
    } catch (err) {
      throw translate(err, kind, ns, name);
    }
  }

  async delete<K extends KindName>(kind: K, namespace: string, name: string, opts: DeleteOptions = {}): Promise<KindMap[K]> {
    this.#check();
    // The precondition makes the object returned the one deleted: a change in between fails the delete, and the
    // store looks again unless the caller named a version.
    for (;;) {
      const current = await this.get(kind, namespace, name);
      if (!current) throw new FlintError('FLINT_ERR_NOT_FOUND', `${kind} '${name}' not found in namespace '${namespace}'`);
      if (opts.resourceVersion !== undefined && opts.resourceVersion !== current.metadata.resourceVersion) {
        throw new FlintError('FLINT_ERR_CONFLICT', `${where(kind, namespace, name)} was modified (resourceVersion ${current.metadata.resourceVersion}, you sent ${opts.resourceVersion}): get it again and retry`, {
          field: 'metadata.resourceVersion',
        });
      }
      try {
        if (!(await this.#client.delete(gvrOf(kind), namespace, name, { resourceVersion: current.metadata.resourceVersion }))) continue;
        return current;
      } catch (err) {
        if ((err as { code?: string }).code === 'FLINT_ERR_CONFLICT' && opts.resourceVersion === undefined) continue;
        throw translate(err, kind, namespace, name);
      }
    }
  }

  watch(opts: WatchOptions, onEvent: (ev: WatchEvent) => void): Watch {
    this.#check();
    if (opts.sinceResourceVersion === undefined) return this.#hub.subscribe(opts, onEvent, [], 0);
    const since = Number(opts.sinceResourceVersion);
    if (!Number.isInteger(since) || since < 0) {
      throw new FlintError('FLINT_ERR_VALIDATION', `bad resourceVersion '${opts.sinceResourceVersion}'`, { field: 'resourceVersion' });
    }
    if (opts.kind && !this.#followed().includes(opts.kind)) {
      throw new FlintError('FLINT_ERR_INTERNAL', `this store does not follow ${opts.kind} (KubeStoreOptions.follow)`);
    }
    for (const kind of opts.kind ? [opts.kind] : this.#followed()) {
      const floor = this.#floor.get(kind) ?? 0;
      if (since < floor) {
        throw new FlintError('FLINT_ERR_GONE', `resourceVersion ${since} is too old for ${kind} (oldest kept is ${floor}): list again and watch from its resourceVersion`);
      }
    }
    const replay = this.#log.filter(([rv]) => rv > since);
    return this.#hub.subscribe(opts, onEvent, replay, since);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#hub.closeAll();
    await Promise.all([...this.#informers.values()].map((i) => i.stop()));
  }
}

/** Opens the store once every kind's informer has its first list. */
export async function openKubeStore(o: KubeStoreOptions): Promise<KubeStore> {
  const store = new KubeStore(o);
  try {
    await store.start();
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}
