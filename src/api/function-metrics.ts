// What `GET /v1/namespaces/{ns}/functions/{name}/metrics` answers (the
// dashboard's charts): a function's request rate, latency percentiles,
// errors and cold starts per sampling interval over the last minutes, taken
// from the routers' own counters, and its instances from the executor's.
import { type Static, Type } from '@sinclair/typebox';

export const MetricsSampleSchema = Type.Object({
  /** Unix milliseconds at the end of the interval. */
  t: Type.Integer({ description: 'End of the interval, Unix milliseconds' }),
  rps: Type.Number({ description: 'Requests per second over the interval' }),
  p50: Type.Union([Type.Number(), Type.Null()], { description: 'Median latency in seconds over the interval (null: no request)' }),
  p99: Type.Union([Type.Number(), Type.Null()], { description: '99th percentile latency in seconds over the interval (null: no request)' }),
  errors: Type.Integer({ description: 'Requests answered 5xx in the interval' }),
  coldStarts: Type.Integer({ description: 'Requests that waited for an instance to be specialized, in the interval' }),
  instances: Type.Union([Type.Integer(), Type.Null()], { description: 'Specialized instances at the end of the interval (null: the executor does not say here)' }),
});

export const FunctionMetricsSchema = Type.Object({
  intervalSeconds: Type.Number({ description: 'How long each sample covers' }),
  samples: Type.Array(MetricsSampleSchema, { description: 'Oldest first; at most the last ten minutes' }),
});

export type MetricsSample = Static<typeof MetricsSampleSchema>;
export type FunctionMetrics = Static<typeof FunctionMetricsSchema>;

/** Where the controller reads samples from, and hears of new ones. */
export interface FunctionMetricsSource {
  readonly intervalSeconds: number;
  history(namespace: string, name: string): MetricsSample[];
  /** Idle warm workers of an environment's pool, where this server's executor reports them. */
  warmPool?(namespace: string, environment: string): number | undefined;
  /** Calls `fn` with each new sample of the function; returns the unsubscribe. */
  subscribe(namespace: string, name: string, fn: (s: MetricsSample) => void): () => void;
}
