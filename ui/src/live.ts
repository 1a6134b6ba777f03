// The platform's objects as the page knows them: listed once, then kept up
// to date by one server-sent-event watch of the store (GET /v1/watch with
// Accept: text/event-stream), resumed from the last version seen after a
// disconnect, listed again when that version is too old. Secrets and
// configmaps are never asked for: the router secret holds the signing key.
import { ApiError, events, get } from './api.ts';

export const KINDS = ['Environment', 'Function', 'Package', 'HTTPTrigger', 'MessageQueueTrigger', 'TimeTrigger', 'CanaryConfig'] as const;
export type Kind = (typeof KINDS)[number];
export const PLURAL: Record<Kind, string> = {
  Environment: 'environments',
  Function: 'functions',
  Package: 'packages',
  HTTPTrigger: 'httptriggers',
  MessageQueueTrigger: 'messagequeuetriggers',
  TimeTrigger: 'timetriggers',
  CanaryConfig: 'canaryconfigs',
};

export interface Resource {
  kind: Kind;
  metadata: { name: string; namespace: string; resourceVersion: string; creationTimestamp?: string; labels?: Record<string, string> };
  spec: any;
  status?: any;
}

const key = (r: Resource) => `${r.metadata.namespace}/${r.metadata.name}`;
const RETRY_MS = 1000;

export class Live {
  readonly objects = new Map<Kind, Map<string, Resource>>(KINDS.map((k) => [k, new Map()]));
  /** "live", "connecting", or why the watch stopped. */
  state = 'connecting';
  readonly #listeners = new Set<() => void>();
  readonly #abort = new AbortController();

  subscribe(fn: () => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  list(kind: Kind): Resource[] {
    return [...this.objects.get(kind)!.values()].sort((a, b) => key(a).localeCompare(key(b)));
  }

  find(kind: Kind, namespace: string, name: string): Resource | undefined {
    return this.objects.get(kind)!.get(`${namespace}/${name}`);
  }

  stop(): void {
    this.#abort.abort();
  }

  #changed(): void {
    for (const fn of this.#listeners) fn();
  }

  async start(): Promise<void> {
    let since: string | undefined;
    while (!this.#abort.signal.aborted) {
      try {
        if (since === undefined) since = await this.#listAll();
        this.state = 'live';
        this.#changed();
        const q = new URLSearchParams({ kinds: KINDS.join(','), resourceVersion: since });
        await events(
          `/v1/watch?${q}`,
          (type, ev: { type: string; object: Resource }) => {
            const map = this.objects.get(ev.object.kind);
            if (!map) return;
            if (type === 'DELETED') map.delete(key(ev.object));
            else map.set(key(ev.object), ev.object);
            since = ev.object.metadata.resourceVersion;
            this.#changed();
          },
          this.#abort.signal,
        );
      } catch (err) {
        if (this.#abort.signal.aborted) return;
        if (err instanceof ApiError && err.status === 401) return;
        // Too old to resume: start over from a fresh list.
        if (err instanceof ApiError && err.status === 410) since = undefined;
        this.state = `reconnecting: ${(err as Error).message}`;
        this.#changed();
      }
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }

  /** Lists every kind; returns the lowest list version, so the watch replays whatever changed since any of them. */
  async #listAll(): Promise<string> {
    const lists = await Promise.all(KINDS.map((k) => get<{ items: Resource[]; resourceVersion: string }>(`/v1/${PLURAL[k]}`)));
    let low: string | undefined;
    KINDS.forEach((k, i) => {
      const map = new Map<string, Resource>();
      for (const r of lists[i].items) map.set(key({ ...r, kind: k }), { ...r, kind: k });
      this.objects.set(k, map);
      const v = lists[i].resourceVersion;
      if (low === undefined || BigInt(v || '0') < BigInt(low)) low = v || '0';
    });
    return low ?? '0';
  }
}
