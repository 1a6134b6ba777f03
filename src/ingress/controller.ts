// Keeps a provider in step with the store: list HTTPTriggers and Secrets,
// watch both from the lists' resourceVersions, and re-apply the whole desired
// set shortly after any change. Full-state apply keeps every provider simple
// and makes a missed or repeated event harmless.
import type { HTTPTrigger, Secret } from '../api/kinds.ts';
import { pino, type Logger } from 'pino';
import type { Store, Watch, WatchEvent } from '../store/store.ts';
import { deriveIngresses, fingerprint, INGRESS_NAMESPACE, type IngressProvider } from './provider.ts';

export interface IngressControllerOptions {
  store: Store;
  provider: IngressProvider;
  logger?: Logger;
  /** Quiet time before applying, so a burst of changes is applied once. */
  debounceMs?: number;
  /** First retry delay after a failed apply; doubles up to maxRetryMs. */
  retryMs?: number;
  maxRetryMs?: number;
}

export interface IngressController {
  readonly provider: IngressProvider;
  /** Starts the provider, lists, applies once and follows changes. */
  start(): Promise<void>;
  /** Stops following changes, then the provider (see IngressProvider.stop). */
  stop(whileTunnelsOpen?: () => Promise<void>): Promise<void>;
  /** Resolves when every change seen so far has been applied (or has failed and awaits retry). */
  idle(): Promise<void>;
}

const key = (ns: string, name: string) => `${ns}/${name}`;

export function createIngressController(opts: IngressControllerOptions): IngressController {
  const { store, provider } = opts;
  const logger = opts.logger ?? pino({ level: 'silent' });
  const debounceMs = opts.debounceMs ?? 50;
  const retryMs = opts.retryMs ?? 500;
  const maxRetryMs = opts.maxRetryMs ?? 30_000;
  const triggers = new Map<string, HTTPTrigger>();
  // Only secrets that could be TLS secrets: no reason to hold the others.
  const secrets = new Map<string, Secret>();
  const watches: Watch[] = [];
  let timer: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  let applied: string | undefined;
  let lastReport = '';
  let failures = 0;
  const waiters: Array<() => void> = [];

  function usedTlsSecret(ns: string, name: string): boolean {
    for (const t of triggers.values()) {
      const s = t.spec.ingressconfig?.tls;
      if (t.spec.createingress && s === name && (t.metadata.namespace === ns || ns === INGRESS_NAMESPACE)) return true;
    }
    return false;
  }

  function onTrigger(ev: WatchEvent): void {
    const t = ev.object as HTTPTrigger;
    const k = key(t.metadata.namespace, t.metadata.name);
    const before = triggers.get(k);
    if (ev.type === 'DELETED') triggers.delete(k);
    else triggers.set(k, t);
    // Routes that never had an ingress do not concern us.
    if (before?.spec.createingress || t.spec.createingress) schedule(debounceMs);
  }

  function onSecret(ev: WatchEvent): void {
    const s = ev.object as Secret;
    const k = key(s.metadata.namespace, s.metadata.name);
    const tlsLike = ev.type !== 'DELETED' && s.data !== undefined && ('tls.crt' in s.data || 'tls.key' in s.data);
    const had = secrets.delete(k);
    if (tlsLike) secrets.set(k, s);
    if ((had || tlsLike) && usedTlsSecret(s.metadata.namespace, s.metadata.name)) schedule(debounceMs);
  }

  function run(): void {
    running = reconcile().finally(() => {
      running = undefined;
      if (again) {
        again = false;
        schedule(debounceMs);
      }
      if (!timer && !running) {
        for (const r of waiters.splice(0)) r();
      }
    });
  }

  function schedule(delay: number): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      run();
    }, delay);
  }

  async function reconcile(): Promise<void> {
    const { desired, problems } = deriveIngresses(triggers.values(), (ns, name) => secrets.get(key(ns, name)));
    const print = fingerprint(desired);
    if (print === applied) return;
    try {
      const result = await provider.apply(desired);
      applied = print;
      failures = 0;
      const report = JSON.stringify([problems, result.skipped, result.warnings]);
      // Say it once per change, not on every unrelated re-apply.
      if (report !== lastReport) {
        lastReport = report;
        for (const p of problems) logger.warn({ route: `${p.namespace}/${p.name}` }, `route gets no ingress: ${p.reason}`);
        for (const s of result.skipped) logger.warn({ ingress: s.name }, `ingress not applied: ${s.reason}`);
        for (const w of result.warnings) logger.warn({ ingress: w.name }, w.reason);
      }
      logger.debug({ count: desired.length, provider: provider.kind }, 'ingresses applied');
    } catch (err) {
      failures++;
      const delay = Math.min(retryMs * 2 ** (failures - 1), maxRetryMs);
      logger.error({ err, provider: provider.kind, retryInMs: delay }, 'applying ingresses failed; the previous ones stay');
      if (!stopped) {
        retry = setTimeout(() => {
          retry = undefined;
          schedule(0);
        }, delay);
        retry.unref();
      }
    }
  }

  return {
    provider,

    async start() {
      await provider.start();
      const tl = await store.list('HTTPTrigger');
      for (const t of tl.items) triggers.set(key(t.metadata.namespace, t.metadata.name), t);
      const sl = await store.list('Secret');
      for (const s of sl.items) {
        if (s.data && ('tls.crt' in s.data || 'tls.key' in s.data)) secrets.set(key(s.metadata.namespace, s.metadata.name), s);
      }
      watches.push(store.watch({ kind: 'HTTPTrigger', sinceResourceVersion: tl.resourceVersion }, onTrigger));
      watches.push(store.watch({ kind: 'Secret', sinceResourceVersion: sl.resourceVersion }, onSecret));
      // Expose what exists before saying we are up.
      run();
      await running;
    },

    async stop(whileTunnelsOpen) {
      stopped = true;
      for (const w of watches.splice(0)) w.close();
      clearTimeout(timer);
      clearTimeout(retry);
      timer = retry = undefined;
      await running;
      try {
        await provider.stop(whileTunnelsOpen);
      } finally {
        for (const r of waiters.splice(0)) r();
      }
    },

    idle() {
      if (!timer && !running) return Promise.resolve();
      return new Promise((r) => waiters.push(r));
    },
  };
}
