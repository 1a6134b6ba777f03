// `GET /v1/namespaces/{ns}/functions/{name}/instances`: a function's
// instances as the executor sees them (`flint fn pods`): worker processes in
// local mode, pods in kubernetes mode. A control plane without an executor
// of its own answers 501 and points at the cluster.
import type { FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { type InstancesSource, InstancesReportSchema } from '../api/instances.ts';
import { NameParams } from '../api/params.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

export function registerInstanceRoutes(app: FastifyInstance, store: Store, source: InstancesSource | undefined): void {
  app.get<{ Params: { namespace: string; name: string } }>(
    '/v1/namespaces/:namespace/functions/:name/instances',
    {
      schema: {
        tags: ['functions'],
        summary: "A function's instances, and the instance budget they draw from",
        params: NameParams,
        response: { 200: InstancesReportSchema, ...errorResponses(404, 501) },
      },
    },
    async (req) => {
      const { namespace, name } = req.params;
      if (!(await store.get('Function', namespace, name))) {
        throw new FlintError('FLINT_ERR_NOT_FOUND', `function '${name}' not found in namespace '${namespace}'`);
      }
      const report = await source?.(namespace, name);
      if (report === undefined) {
        throw new FlintError(
          'FLINT_ERR_NOT_IMPLEMENTED',
          `this server's instances are pods of the cluster: kubectl get pods -n <function namespace> -l functionName=${name},functionNamespace=${namespace}`,
        );
      }
      return report;
    },
  );
}
