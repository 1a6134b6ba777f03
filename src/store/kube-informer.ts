// Follows one kind across every namespace: a list, then a watch from the
// list's version, watched again from the last version seen whenever the API
// server ends the stream. When the server no longer has that version (410),
// it lists again and reports the difference from what it knew as events, so
// whoever follows it never misses a change, only some intermediate states.
import type { AnyResource, KindName } from '../api/kinds.ts';
import type { KubeClient, KubeObject, KubeWatch, KubeWatchEvent } from './kube-client.ts';
import { fromKube, gvrOf } from './kube-objects.ts';
import type { WatchEventType } from './store.ts';

export interface InformerOptions {
  client: KubeClient;
  kind: KindName;
  /** Each change, in the order of this kind's versions. */
  onChange(rv: number, type: WatchEventType, object: AnyResource): void;
  /** After a relist: versions at or below this one can no longer be replayed one by one. */
  onResync(rv: number): void;
  onError(err: unknown): void;
  watchTimeoutSeconds?: number;
  retryDelayMs?: number;
}

const keyOf = (o: AnyResource) => `${o.metadata.namespace}/${o.metadata.name}`;

export class Informer {
  readonly #o: InformerOptions;
  readonly #known = new Map<string, AnyResource>();
  #rv = '0';
  #watch: KubeWatch | undefined;
  #stopped = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;

  constructor(o: InformerOptions) {
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

  async #list(report: boolean): Promise<void> {
    const { kind, client } = this.#o;
    const list = await client.list<KubeObject>(gvrOf(kind), undefined);
    const listRv = list.metadata.resourceVersion ?? this.#rv;
    const seen = new Set<string>();
    const changes: Array<[number, WatchEventType, AnyResource]> = [];
    for (const item of list.items) {
      const obj = fromKube(kind, item);
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
    this.#o.onResync(Number(listRv));
  }

  #onEvent(ev: KubeWatchEvent): void {
    const rv = ev.object.metadata.resourceVersion ?? this.#rv;
    this.#rv = rv;
    if (ev.type === 'BOOKMARK') return;
    const obj = fromKube(this.#o.kind, ev.object);
    if (ev.type === 'DELETED') this.#known.delete(keyOf(obj));
    else this.#known.set(keyOf(obj), obj);
    this.#o.onChange(Number(rv), ev.type, obj);
  }

  async #run(): Promise<void> {
    const { client, kind } = this.#o;
    let failures = 0;
    while (!this.#stopped) {
      try {
        this.#watch = client.watch(gvrOf(kind), undefined, { resourceVersion: this.#rv, timeoutSeconds: this.#o.watchTimeoutSeconds ?? 300 }, (ev) =>
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
        await this.#sleep(Math.min((this.#o.retryDelayMs ?? 250) * 2 ** (failures - 1), 10_000));
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
