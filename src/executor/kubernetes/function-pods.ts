// The function namespace's Flint pods (pool and newdeploy alike) as one
// watch sees them: claims, newdeploy hand-outs and the pod check read this
// instead of listing pods, and wait for the next change instead of polling,
// so the API server sees one list at start and one per relist, however many
// requests are waiting for a pod.
import type { GroupVersionResource, KubeClient, KubeObject } from '../../store/kube-client.ts';
import { Informer } from '../../store/kube-informer.ts';

/** The pods resource, which every part of the executor that reads or writes pods names. */
export const PODS: GroupVersionResource = { group: '', version: 'v1', resource: 'pods' };

export interface FunctionPodsOptions {
  client: KubeClient;
  namespace: string;
  onError(err: unknown): void;
  watchTimeoutSeconds?: number;
  retryDelayMs?: number;
}

export function isReady(pod: any): boolean {
  return Boolean(pod.status?.podIP) && !pod.metadata.deletionTimestamp && (pod.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
}

/** Pods carrying every one of these labels with these values. */
export function hasLabels(pod: KubeObject, labels: Record<string, string>): boolean {
  return Object.entries(labels).every(([k, v]) => pod.metadata.labels?.[k] === v);
}

export class FunctionPods {
  readonly #informer: Informer;
  readonly #waiting = new Set<() => void>();
  /** Pods deleted here whose deletion the watch has not shown yet: never handed out again meanwhile. */
  readonly #deleted = new Set<string>();
  #stopped = false;

  constructor(o: FunctionPodsOptions) {
    this.#informer = new Informer({
      client: o.client,
      gvr: PODS,
      namespace: o.namespace,
      // Only what Flint made: other pods in the namespace are none of its business.
      labelSelector: 'executorType',
      onChange: (_rv, type, pod) => {
        if (type === 'DELETED') this.#deleted.delete(pod.metadata.name);
        this.#wakeAll();
      },
      onResync: () => {
        const known = new Set(this.list().map((p) => p.metadata.name));
        for (const name of this.#deleted) if (!known.has(name)) this.#deleted.delete(name);
        this.#wakeAll();
      },
      onError: o.onError,
      watchTimeoutSeconds: o.watchTimeoutSeconds,
      retryDelayMs: o.retryDelayMs,
    });
  }

  async start(): Promise<void> {
    await this.#informer.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#wakeAll();
    await this.#informer.stop();
  }

  /** The pods known now with these labels, less those deleted here. */
  list(labels: Record<string, string> = {}): any[] {
    return [...this.#informer.objects()].filter((p) => !this.#deleted.has(p.metadata.name) && hasLabels(p, labels));
  }

  /** This executor deleted the pod (or is about to): it is gone for every reader from now on. */
  deleted(name: string): void {
    if ([...this.#informer.objects()].some((p) => p.metadata.name === name)) this.#deleted.add(name);
  }

  /** Wakes every `waitFor` to look again: something it skipped changed here rather than in the cluster. */
  poke(): void {
    this.#wakeAll();
  }

  /**
   * Calls `pick` now and after each change until it returns something, the deadline passes or the pods are
   * no longer followed (undefined then).
   */
  async waitFor<R>(pick: () => R | undefined | Promise<R | undefined>, deadline: number, stopped: () => boolean = () => false): Promise<R | undefined> {
    for (;;) {
      // Armed before looking, so a change during an async pick is not missed.
      const changed = this.#nextChange(deadline);
      const found = await pick();
      if (found !== undefined) {
        changed.cancel();
        return found;
      }
      if (Date.now() >= deadline || stopped() || this.#stopped) {
        changed.cancel();
        return undefined;
      }
      await changed.promise;
    }
  }

  #nextChange(deadline: number): { promise: Promise<void>; cancel(): void } {
    let wake!: () => void;
    const promise = new Promise<void>((resolve) => {
      const timer = setTimeout(() => wake(), Math.max(0, deadline - Date.now()));
      wake = () => {
        clearTimeout(timer);
        this.#waiting.delete(wake);
        resolve();
      };
      this.#waiting.add(wake);
    });
    return { promise, cancel: () => wake() };
  }

  #wakeAll(): void {
    for (const wake of [...this.#waiting]) wake();
  }
}
