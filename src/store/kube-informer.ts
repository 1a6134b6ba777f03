// Follows one kind, in one namespace or all: a list, then a watch from the
// list's version, watched again from the last version seen whenever the API
// server ends the stream (or it breaks: an API-server restart). When the
// server no longer has that version (410), it lists again and reports the
// difference from what it knew as events, so whoever follows it never
// misses a change, only some intermediate states. List calls are the first
// one and one per 410, however many read what it knows.
import type { GroupVersionResource, KubeClient, KubeObject, KubeWatch, KubeWatchEvent } from './kube-client.ts';
import type { WatchEventType } from './store.ts';

interface Named {
  metadata: { name: string; namespace?: string; resourceVersion?: string };
}

export interface InformerOptions<T extends Named = KubeObject> {
  client: KubeClient;
  gvr: GroupVersionResource;
  /** undefined: every namespace. */
  namespace?: string;
  labelSelector?: string;
  /** The API server's object as the follower wants it. */
  convert?: (o: KubeObject) => T;
  /** Each change, in the order of this kind's versions. */
  onChange(rv: number, type: WatchEventType, object: T): void;
  /** After a relist: versions at or below this one can no longer be replayed one by one. */
  onResync?(rv: number): void;
  onError(err: unknown): void;
  watchTimeoutSeconds?: number;
  retryDelayMs?: number;
}

const keyOf = (o: Named) => `${o.metadata.namespace}/${o.metadata.name}`;

export class Informer<T extends Named = KubeObject> {
  readonly #o: InformerOptions<T>;
  readonly #known = new Map<string, T>();
  #rv = '0';
  #watch: KubeWatch | undefined;
  #stopped = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;

  constructor(o: InformerOptions<T>) {
    this.#o = o;
  }

  /** The version the first list was taken at: changes after it are reported. */
  async start(): Promise<number> {
    await this.#list(false);
    this.#loop = this.#run();
    return Number(this.#rv);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#watch?.close();
    this.#wake?.();
    await this.#loop;
  }

  /** What is known now, as of the last event seen. */
  objects(): IterableIterator<T> {
    return this.#known.values();
  }

  #convert(o: KubeObject): T {
    return this.#o.convert ? this.#o.convert(o) : (o as unknown as T);
  }

  async #list(report: boolean): Promise<void> {
    const { client, gvr, namespace, labelSelector } = this.#o;
    const list = await client.list<KubeObject>(gvr, namespace, { labelSelector });
    const listRv = list.metadata.resourceVersion ?? this.#rv;
    const seen = new Set<string>();
    const changes: Array<[number, WatchEventType, T]> = [];
    for (const item of list.items) {
      const obj = this.#convert(item);
      const key = keyOf(obj);
      seen.add(key);
      const before = this.#known.get(key);
      if (!before) changes.push([Number(obj.metadata.resourceVersion), 'ADDED', obj]);
      else if (before.metadata.resourceVersion !== obj.metadata.resourceVersion) changes.push([Number(obj.metadata.resourceVersion), 'MODIFIED', obj]);
      this.#known.set(key, obj);
    }
    for (const [key, obj] of this.#known) {
      if (seen.has(key)) continue;
      this.#known.delete(key);
      changes.push([Number(listRv), 'DELETED', obj]);
    }
    this.#rv = listRv;
    if (!report) return;
    changes.sort((a, b) => a[0] - b[0]);
    for (const [rv, type, obj] of changes) this.#o.onChange(rv, type, obj);
    this.#o.onResync?.(Number(listRv));
  }

  #onEvent(ev: KubeWatchEvent): void {
    const rv = ev.object.metadata.resourceVersion ?? this.#rv;
    this.#rv = rv;
    if (ev.type === 'BOOKMARK') return;
    const obj = this.#convert(ev.object);
    if (ev.type === 'DELETED') this.#known.delete(keyOf(obj));
    else this.#known.set(keyOf(obj), obj);
    this.#o.onChange(Number(rv), ev.type, obj);
  }

  async #run(): Promise<void> {
    const { client, gvr, namespace, labelSelector } = this.#o;
    let failures = 0;
    while (!this.#stopped) {
      try {
        this.#watch = client.watch(gvr, namespace, { resourceVersion: this.#rv, timeoutSeconds: this.#o.watchTimeoutSeconds ?? 300, labelSelector }, (ev) =>
          this.#onEvent(ev),
        );
        await this.#watch.done;
        failures = 0;
      } catch (watchErr) {
        if (this.#stopped) return;
        let err = watchErr;
        if ((err as { code?: string }).code === 'FLINT_ERR_GONE') {
          try {
            await this.#list(true);
            failures = 0;
            continue;
          } catch (listErr) {
            err = listErr;
          }
        }
        this.#o.onError(err);
        failures++;
        // At most 2 s apart: after an API-server restart the caches (routes, functions) must catch up within
        // seconds of it answering, not after a backoff grown during the outage.
        await this.#sleep(Math.min((this.#o.retryDelayMs ?? 250) * 2 ** (failures - 1), 2000));
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }
}
