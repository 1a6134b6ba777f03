// The Store interface: every backend (sqlite for local mode, kubernetes CRDs
// later) implements exactly this, and one contract test runs against each.
import type { AnyResource, KindMap, KindName } from '../api/kinds.ts';
import { LABEL_SELECTOR_TERMS } from '../api/params.ts';

export interface ListOptions {
  /** Omit for every namespace. */
  namespace?: string;
  /** Kubernetes-style equality selector: `a=b,c!=d,e` (e: key exists, !e: key absent). */
  labelSelector?: string;
}

export interface ListResult<T> {
  items: T[];
  /** The store's resourceVersion when the list was taken: resume a watch from here. */
  resourceVersion: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchEvent<T extends AnyResource = AnyResource> {
  type: WatchEventType;
  object: T;
}

export interface WatchOptions {
  kind?: KindName;
  namespace?: string;
  /**
   * Replay every change after this resourceVersion, then follow live. Omit to
   * follow live only. A version older than the retained history fails with
   * FLINT_ERR_GONE: list again and watch from the list's resourceVersion.
   */
  sinceResourceVersion?: string;
}

export interface Watch {
  close(): void;
}

export interface DeleteOptions {
  /** Refuse with FLINT_ERR_CONFLICT unless the stored object has this version. */
  resourceVersion?: string;
}

export interface Store {
  get<K extends KindName>(kind: K, namespace: string, name: string): Promise<KindMap[K] | undefined>;
  list<K extends KindName>(kind: K, opts?: ListOptions): Promise<ListResult<KindMap[K]>>;
  /** Sets uid, resourceVersion, generation 1, creationTimestamp. FLINT_ERR_ALREADY_EXISTS on a taken name. */
  create<T extends AnyResource>(obj: T): Promise<T>;
  /**
   * Replaces spec/data/labels/annotations (status too when given). With
   * metadata.resourceVersion set, refuses a stale one with FLINT_ERR_CONFLICT.
   * generation grows when the spec or data changes. FLINT_ERR_NOT_FOUND if absent.
   */
  update<T extends AnyResource>(obj: T): Promise<T>;
  /** Writes only `status` (no generation bump); same concurrency rule as update. */
  updateStatus<T extends AnyResource>(obj: T): Promise<T>;
  /** Returns the deleted object. FLINT_ERR_NOT_FOUND if absent. */
  delete<K extends KindName>(kind: K, namespace: string, name: string, opts?: DeleteOptions): Promise<KindMap[K]>;
  /** Events arrive in resourceVersion order, one at a time. */
  watch(opts: WatchOptions, onEvent: (ev: WatchEvent) => void): Watch;
  close(): Promise<void>;
}

/** Parses and applies a label selector (the grammar of src/api/params.ts). Shared by backends that filter in process. */
export function parseLabelSelector(selector: string): (labels: Record<string, string> | undefined) => boolean {
  const terms = selector
    .split(',')
    .map((t) => t.replace(/^ +| +$/g, ''))
    .filter(Boolean)
    .map((t) => {
      let m = LABEL_SELECTOR_TERMS.compare.exec(t);
      if (m) {
        const [, key, op, value] = m;
        // Own keys only: a selector naming `constructor` must not find Object's.
        return (l: Record<string, string>) => {
          const has = Object.hasOwn(l, key);
          return op === '!=' ? !has || l[key] !== value : has && l[key] === value;
        };
      }
      m = LABEL_SELECTOR_TERMS.absent.exec(t);
      if (m) {
        const key = m[1];
        return (l: Record<string, string>) => !Object.hasOwn(l, key);
      }
      if (LABEL_SELECTOR_TERMS.present.test(t)) return (l: Record<string, string>) => Object.hasOwn(l, t);
      throw new SelectorError(`bad label selector term '${t}'`);
    });
  return (labels) => terms.every((f) => f(labels ?? {}));
}

export class SelectorError extends Error {}
