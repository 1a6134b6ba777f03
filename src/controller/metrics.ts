// The control plane's Prometheus metrics (`GET /metrics`): the process's own
// (CPU, memory, event loop), what the store holds, and whatever the server
// adds to the same registry (message-queue consumers, say). Counted when
// scraped, so nothing on any request path pays for them.
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { type AnyResource, BUILD_STATUSES, KIND_NAMES, type KindName, type Package } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';

export function controllerMetrics(store: Store, registry: Registry = new Registry()): Registry {
  collectDefaultMetrics({ register: registry, prefix: 'flint_controller_' });
  // prom-client collects every metric of a scrape at once: both gauges share one listing of the store.
  let scrape: Promise<Map<KindName, AnyResource[]>> | undefined;
  const listAll = (): Promise<Map<KindName, AnyResource[]>> => {
    scrape ??= (async () => {
      const all = new Map<KindName, AnyResource[]>();
      for (const kind of KIND_NAMES) all.set(kind, (await store.list(kind)).items as AnyResource[]);
      return all;
    })().finally(() => {
      scrape = undefined;
    });
    return scrape;
  };
  new Gauge({
    name: 'flint_resources',
    help: 'Resources in the store, by kind and namespace',
    labelNames: ['kind', 'namespace'],
    registers: [registry],
    async collect() {
      const all = await listAll();
      this.reset();
      for (const [kind, items] of all) {
        const counts = new Map<string, number>();
        for (const r of items) counts.set(r.metadata.namespace, (counts.get(r.metadata.namespace) ?? 0) + 1);
        for (const [namespace, n] of counts) this.set({ kind, namespace }, n);
      }
    },
  });
  new Gauge({
    name: 'flint_packages',
    help: 'Packages by build status',
    labelNames: ['buildstatus'],
    registers: [registry],
    async collect() {
      const counts = new Map<string, number>(BUILD_STATUSES.map((s) => [s, 0]));
      for (const p of ((await listAll()).get('Package') ?? []) as Package[]) {
        const s = p.status?.buildstatus ?? 'pending';
        counts.set(s, (counts.get(s) ?? 0) + 1);
      }
      for (const [buildstatus, n] of counts) this.set({ buildstatus }, n);
    },
  });
  return registry;
}

export function registerMetricsRoute(app: FastifyInstance, registry: Registry): void {
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
}
