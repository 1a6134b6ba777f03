// What `GET /v1/namespaces/{ns}/functions/{name}/instances` answers (and
// `flint fn pods` prints): a function's instances as the executor sees them,
// and the instance budget they draw from. One schema for the route, the
// document and the CLI.
import { type Static, Type } from '@sinclair/typebox';

export const InstanceInfoSchema = Type.Object({
  name: Type.String({ description: 'Instance id (the worker, or the pod in kubernetes mode)' }),
  state: Type.Union([Type.Literal('ready'), Type.Literal('draining')], { description: 'draining: finishing its requests before it stops (an update, a deletion)' }),
  current: Type.Boolean({ description: "Runs the function's current code (false: an older version during a rolling update)" }),
  active: Type.Integer({ description: 'Requests it is serving now' }),
  served: Type.Integer({ description: 'Requests it has served' }),
  ageSeconds: Type.Integer(),
  idleSeconds: Type.Integer({ description: 'Since its last request ended' }),
});

export const InstancesReportSchema = Type.Object(
  {
    items: Type.Array(InstanceInfoSchema),
    starting: Type.Integer({ description: 'Instances being started or specialized for it' }),
    budget: Type.Optional(
      Type.Object(
        {
          instances: Type.Integer(),
          maxInstances: Type.Integer(),
          memoryMB: Type.Integer(),
          maxMemoryMB: Type.Integer(),
        },
        { description: 'The instance budget of the whole server (local mode), all functions together' },
      ),
    ),
  },
);

export type InstanceInfo = Static<typeof InstanceInfoSchema>;
export type InstancesReport = Static<typeof InstancesReportSchema>;

/** Reads a function's instances; undefined where this server cannot tell (kubernetes mode: its pods are in the cluster). */
export type InstancesSource = (namespace: string, name: string) => InstancesReport | undefined | Promise<InstancesReport>;
