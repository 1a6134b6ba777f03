// `GET /v1/namespaces/{ns}/functions/{name}/metrics`: a function's request
// rate, latency, errors, cold starts and instances over the last minutes
// (src/controller/metrics-sampler.ts), as JSON; with follow=true, as
// server-sent events: one `history` event with what is kept, then a
// `sample` event per interval and, where this server knows its instances, an
// `instances` event with the same report as GET .../instances (plus
// `warmPool`, the environment's idle warm workers, in local mode). Pushed, so
// the dashboard's charts never poll.
import type { FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { FunctionMetricsSchema, type FunctionMetricsSource } from '../api/function-metrics.ts';
import type { InstancesSource } from '../api/instances.ts';
import { MetricsQuery, NameParams } from '../api/params.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';
import { EventSchema, openEventStream } from './sse.ts';

export function registerFunctionMetricsRoute(app: FastifyInstance, store: Store, source: FunctionMetricsSource | undefined, instances: InstancesSource | undefined): void {
  app.get<{ Params: { namespace: string; name: string }; Querystring: { follow?: 'true' | 'false' } }>(
    '/v1/namespaces/:namespace/functions/:name/metrics',
    {
      schema: {
        tags: ['functions'],
        summary: "A function's requests per second, p50/p99 latency, errors and cold starts over the last minutes",
        description: "Sampled from the routers' own counters. With follow=true: text/event-stream.",
        params: NameParams,
        querystring: MetricsQuery,
        response: {
          200: {
            description: 'The samples kept, oldest first',
            content: { 'application/json': { schema: FunctionMetricsSchema }, 'text/event-stream': { schema: EventSchema } },
          },
          ...errorResponses(404, 501),
        },
      },
    },
    async (req, reply) => {
      const { namespace, name } = req.params;
      if (!(await store.get('Function', namespace, name))) {
        throw new FlintError('FLINT_ERR_NOT_FOUND', `function '${name}' not found in namespace '${namespace}'`);
      }
      if (source === undefined) throw new FlintError('FLINT_ERR_NOT_IMPLEMENTED', "this server samples no router's counters: read the routers' /metrics");
      if (req.query.follow !== 'true') {
        reply.type('application/json');
        return { intervalSeconds: source.intervalSeconds, samples: source.history(namespace, name) };
      }
      reply.hijack();
      const stream = openEventStream(req.raw, reply.raw);
      stream.send('history', { intervalSeconds: source.intervalSeconds, samples: source.history(namespace, name) });
      const pushInstances = async () => {
        try {
          const report = await instances?.(namespace, name);
          const env = (await store.get('Function', namespace, name))?.spec.environment;
          const warmPool = env ? source.warmPool?.(env.namespace ?? namespace, env.name) : undefined;
          if (report !== undefined) stream.send('instances', warmPool === undefined ? report : { ...report, warmPool });
        } catch {
          // The executor may be between leaders (kubernetes mode): the next interval tries again.
        }
      };
      void pushInstances();
      stream.onClose(
        source.subscribe(namespace, name, (s) => {
          stream.send('sample', s);
          void pushInstances();
        }),
      );
    },
  );
}
