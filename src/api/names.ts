// The API's names and word lists, free of the schema library: the CLI reads
// them at start-up, where building the schemas would cost more than the
// command itself. meta.ts and kinds.ts build the schemas on them.

export const API_VERSION = 'flint.dev/v1';
export const FISSION_API_VERSION = 'fission.io/v1';
export const DEFAULT_NAMESPACE = 'default';
/** The control plane's own namespace; the router secret lives here. */
export const SYSTEM_NAMESPACE = 'flint';

export const DNS1123_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
export const DNS1123_MAX = 63;

export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE'] as const;
export const STREAMING_PROTOCOLS = ['auto', 'sse', 'chunked', 'websocket'] as const;
export const MQ_TYPES = ['kafka', 'nats-jetstream', 'rabbitmq', 'redis'] as const;
/** `keda`: a KEDA-scaled connector (Fission's CLI default); `fission`: Fission's classic built-in consumer (Kafka only). */
export const MQT_KINDS = ['keda', 'fission'] as const;
/**
 * A message-queue trigger's state, as the trigger manager reports it in its
 * status: `consuming` from its broker; `waiting` for something it needs (a
 * broker configured for its type, its secret); `error`: its broker failed it
 * and it is retrying.
 */
export const MQT_STATES = ['consuming', 'waiting', 'error'] as const;

export const BUILD_STATUSES = ['pending', 'running', 'succeeded', 'failed', 'none'] as const;

/** A canary's progress (Fission's values): rolling out, all traffic on the new function, rolled back, or stopped for a broken reference. */
export const CANARY_STATUSES = ['pending', 'succeeded', 'failed', 'aborted'] as const;
/** What counts as a failure of a canary's new function: a 5xx answer. */
export const CANARY_FAILURE_TYPES = ['status-code'] as const;

export const KIND_NAMES = ['Environment', 'Function', 'Package', 'HTTPTrigger', 'MessageQueueTrigger', 'Secret', 'ConfigMap', 'TimeTrigger', 'CanaryConfig'] as const;
export type KindName = (typeof KIND_NAMES)[number];

/** Each kind's URL segment and table name. */
export const KIND_PLURALS: Readonly<Record<KindName, string>> = {
  Environment: 'environments',
  Function: 'functions',
  Package: 'packages',
  HTTPTrigger: 'httptriggers',
  MessageQueueTrigger: 'messagequeuetriggers',
  Secret: 'secrets',
  ConfigMap: 'configmaps',
  TimeTrigger: 'timetriggers',
  CanaryConfig: 'canaryconfigs',
};
