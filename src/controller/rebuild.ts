// `POST .../packages/<name>/rebuild`: a failed build runs again. Anything but
// a failed package is refused, so a rebuild cannot cut a running build short
// or throw away a good deployment.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { NameParams } from '../api/params.ts';
import { PackageSchema } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

export function registerRebuildRoute(app: FastifyInstance, store: Store): void {
  app.post<{ Params: { namespace: string; name: string } }>(
    '/v1/namespaces/:namespace/packages/:name/rebuild',
    {
      schema: {
        tags: ['packages'],
        operationId: 'rebuildPackage',
        summary: 'Build a failed package again',
        params: NameParams,
        response: { 200: Type.Ref(PackageSchema), ...errorResponses(404, 409) },
      },
    },
    async (req) => {
      const { namespace, name } = req.params;
      const pkg = await store.get('Package', namespace, name);
      if (!pkg) throw new FlintError('FLINT_ERR_NOT_FOUND', `Package '${name}' not found in namespace '${namespace}'`);
      const status = pkg.status?.buildstatus ?? 'none';
      if (status !== 'failed') {
        throw new FlintError('FLINT_ERR_CONFLICT', `package '${name}' is not in failed state (its build status is '${status}'): only a failed build can be rebuilt`);
      }
      // With the version just read: a concurrent change gets a 409, not a lost update.
      return store.updateStatus({ ...pkg, status: { buildstatus: 'pending', buildlog: '', lastUpdateTimestamp: new Date().toISOString() } });
    },
  );
}
