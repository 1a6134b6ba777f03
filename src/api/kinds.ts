// One TypeBox schema per kind. These schemas are the single source for
// validation at the API boundary, the OpenAPI document and the CRD YAML.
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { ApiVersion, DNS1123_LABEL, DNS1123_MAX, ObjectMeta, ObjectRef, Resources, type StoredMeta, StringMap } from './meta.ts';
import { BUILD_STATUSES, CANARY_FAILURE_TYPES, CANARY_STATUSES, HTTP_METHODS, KIND_PLURALS, type KindName, MQ_TYPES, MQT_KINDS, MQT_STATES, STREAMING_PROTOCOLS } from './names.ts';

export { BUILD_STATUSES, CANARY_STATUSES, KIND_NAMES, type KindName, MQ_TYPES, MQT_KINDS, MQT_STATES, STREAMING_PROTOCOLS } from './names.ts';
export const HttpMethod = Type.Union(HTTP_METHODS.map((m) => Type.Literal(m)));
export const HTTP_METHOD_NAMES: readonly string[] = HTTP_METHODS;

const Strict = { additionalProperties: false } as const;

// ---- Environment -----------------------------------------------------------

export const EnvironmentSpec = Type.Object(
  {
    version: Type.Optional(Type.Integer({ minimum: 1, maximum: 3, default: 2 })),
    runtime: Type.Object(
      {
        image: Type.String({ minLength: 1, maxLength: 512 }),
        env: Type.Optional(StringMap),
      },
      Strict,
    ),
    builder: Type.Optional(
      Type.Object(
        {
          image: Type.Optional(Type.String({ maxLength: 512 })),
          command: Type.Optional(Type.String({ maxLength: 4096 })),
          env: Type.Optional(StringMap),
        },
        Strict,
      ),
    ),
    // Unset: the install's executor.poolSize, read when the pool is made, so changing that value changes every such pool.
    poolsize: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    resources: Type.Optional(Resources),
    keeparchive: Type.Optional(Type.Boolean()),
    allowAccessToExternalNetwork: Type.Optional(Type.Boolean()),
    terminationGracePeriod: Type.Optional(Type.Integer({ minimum: 0, maximum: 86400, default: 90 })),
    imagepullsecret: Type.Optional(Type.String()),
  },
  Strict,
);
export type EnvironmentSpec = Static<typeof EnvironmentSpec>;

// ---- Package -----------------------------------------------------------------

export const Checksum = Type.Object(
  {
    type: Type.Literal('sha256'),
    sum: Type.String({ pattern: '^[0-9a-f]{64}$' }),
  },
  Strict,
);
export const Archive = Type.Object(
  {
    type: Type.Union([Type.Literal('literal'), Type.Literal('url')]),
    /** base64 of the file or zip, for small archives kept inside the object. */
    literal: Type.Optional(Type.String({ contentEncoding: 'base64' })),
    url: Type.Optional(Type.String({ maxLength: 2048 })),
    checksum: Type.Optional(Checksum),
  },
  Strict,
);
export type Archive = Static<typeof Archive>;

export type BuildStatus = (typeof BUILD_STATUSES)[number];

export const PackageSpec = Type.Object(
  {
    environment: ObjectRef,
    source: Type.Optional(Archive),
    deployment: Type.Optional(Archive),
    buildcmd: Type.Optional(Type.String({ maxLength: 4096 })),
  },
  Strict,
);
export type PackageSpec = Static<typeof PackageSpec>;

export const PackageStatus = Type.Object(
  {
    buildstatus: Type.Optional(Type.Union(BUILD_STATUSES.map((s) => Type.Literal(s)))),
    buildlog: Type.Optional(Type.String()),
    lastUpdateTimestamp: Type.Optional(Type.String()),
  },
  Strict,
);
export type PackageStatus = Static<typeof PackageStatus>;

// ---- Function ------------------------------------------------------------------

export const EXECUTOR_TYPES = ['poolmgr', 'newdeploy'] as const;
export type ExecutorType = (typeof EXECUTOR_TYPES)[number];

export const ExecutionStrategy = Type.Object(
  {
    executorType: Type.Optional(Type.Union(EXECUTOR_TYPES.map((t) => Type.Literal(t)), { default: 'poolmgr' })),
    minScale: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    maxScale: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    targetCPU: Type.Optional(Type.Integer({ minimum: 1, maximum: 99 })),
    specializationTimeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600, default: 120 })),
  },
  Strict,
);
export type ExecutionStrategy = Static<typeof ExecutionStrategy>;

export type StreamingProtocol = (typeof STREAMING_PROTOCOLS)[number];

/**
 * Limits for responses that stream and for WebSockets, instead of
 * functionTimeout once the response has begun. `protocol` says which of them
 * the limits apply to: `auto` both, `sse` and `chunked` streamed HTTP
 * responses, `websocket` upgraded connections.
 */
export const Streaming = Type.Object(
  {
    protocol: Type.Optional(Type.Union(STREAMING_PROTOCOLS.map((p) => Type.Literal(p)), { default: 'auto' })),
    /** Longest silence: inside a response body, or on a WebSocket in both directions. */
    idleTimeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400 })),
    /** Longest a response body or a WebSocket may last, from the response head. */
    maxDurationSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 604800 })),
  },
  Strict,
);
export type Streaming = Static<typeof Streaming>;

export const FunctionSpec = Type.Object(
  {
    environment: ObjectRef,
    package: Type.Object(
      {
        packageref: ObjectRef,
        /** The entrypoint, passed to the runtime verbatim ("handler", "file.func"). */
        functionName: Type.Optional(Type.String({ maxLength: 256 })),
      },
      Strict,
    ),
    invokeStrategy: Type.Optional(
      Type.Object(
        {
          strategyType: Type.Optional(Type.Literal('execution')),
          executionStrategy: Type.Optional(ExecutionStrategy),
        },
        Strict,
      ),
    ),
    functionTimeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400, default: 60 })),
    idletimeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400, default: 120 })),
    concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 100000, default: 500 })),
    requestsPerPod: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000, default: 1 })),
    onceOnly: Type.Optional(Type.Boolean()),
    streaming: Type.Optional(Streaming),
    resources: Type.Optional(Resources),
    secrets: Type.Optional(Type.Array(ObjectRef, { maxItems: 64 })),
    configmaps: Type.Optional(Type.Array(ObjectRef, { maxItems: 64 })),
    env: Type.Optional(StringMap),
  },
  Strict,
);
export type FunctionSpec = Static<typeof FunctionSpec>;

// ---- HTTPTrigger ---------------------------------------------------------------

export const FunctionReference = Type.Object(
  {
    type: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('function-weights')], { default: 'name' })),
    name: Type.Optional(Type.String({ maxLength: DNS1123_MAX, pattern: DNS1123_LABEL })),
    functionweights: Type.Optional(Type.Record(Type.String({ maxLength: DNS1123_MAX, pattern: DNS1123_LABEL }), Type.Integer({ minimum: 0, maximum: 100 }))),
  },
  Strict,
);
export type FunctionReference = Static<typeof FunctionReference>;

export const IngressConfig = Type.Object(
  {
    annotations: Type.Optional(StringMap),
    host: Type.Optional(Type.String({ maxLength: 253 })),
    path: Type.Optional(Type.String({ maxLength: 2048 })),
    tls: Type.Optional(Type.String({ maxLength: 253 })),
  },
  Strict,
);
export type IngressConfig = Static<typeof IngressConfig>;

export const HTTPTriggerSpec = Type.Object(
  {
    host: Type.Optional(Type.String({ maxLength: 253 })),
    relativeurl: Type.Optional(Type.String({ maxLength: 2048 })),
    prefix: Type.Optional(Type.String({ maxLength: 2048 })),
    keepPrefix: Type.Optional(Type.Boolean()),
    method: Type.Optional(Type.Union([HttpMethod, Type.Literal('')])),
    methods: Type.Optional(Type.Array(HttpMethod, { maxItems: 9, uniqueItems: true })),
    functionref: FunctionReference,
    createingress: Type.Optional(Type.Boolean()),
    ingressconfig: Type.Optional(IngressConfig),
  },
  Strict,
);
export type HTTPTriggerSpec = Static<typeof HTTPTriggerSpec>;

// ---- MessageQueueTrigger -------------------------------------------------------

/** KEDA's counts are Kubernetes int32s. */
const INT32_MAX = 2_147_483_647;
export type MessageQueueType = (typeof MQ_TYPES)[number];

export const MessageQueueTriggerSpec = Type.Object(
  {
    functionref: FunctionReference,
    messageQueueType: Type.Union(MQ_TYPES.map((t) => Type.Literal(t))),
    topic: Type.String({ minLength: 1, maxLength: 249 }),
    respTopic: Type.Optional(Type.String({ maxLength: 249 })),
    errorTopic: Type.Optional(Type.String({ maxLength: 249 })),
    maxRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, default: 0 })),
    contentType: Type.Optional(Type.String({ maxLength: 255, default: 'application/json' })),
    metadata: Type.Optional(StringMap),
    secret: Type.Optional(Type.String({ maxLength: 253 })),
    // Fission's: which of its trigger heads owns the trigger, and KEDA's scaling of the connector (kubernetes mode).
    // Local mode consumes every trigger itself, whatever the kind, and runs one consumer per trigger.
    mqtkind: Type.Optional(Type.Union(MQT_KINDS.map((k) => Type.Literal(k)))),
    pollingInterval: Type.Optional(Type.Integer({ minimum: 1, maximum: INT32_MAX })),
    cooldownPeriod: Type.Optional(Type.Integer({ minimum: 0, maximum: INT32_MAX })),
    minReplicaCount: Type.Optional(Type.Integer({ minimum: 0, maximum: INT32_MAX })),
    maxReplicaCount: Type.Optional(Type.Integer({ minimum: 1, maximum: INT32_MAX })),
  },
  Strict,
);
export type MessageQueueTriggerSpec = Static<typeof MessageQueueTriggerSpec>;

// ---- TimeTrigger ---------------------------------------------------------------

export const TimeTriggerSpec = Type.Object(
  {
    /** 5 fields, 6 with seconds first, `@every <duration>` or a nickname (`@hourly`); UTC. See src/api/cron.ts. */
    cron: Type.String({ minLength: 1, maxLength: 256 }),
    functionref: FunctionReference,
    method: Type.Optional(Type.Union([HttpMethod, Type.Literal('')], { default: 'POST' })),
    /** Appended to the function's path: the function sees it as its request path. */
    subpath: Type.Optional(Type.String({ maxLength: 2048, default: '/' })),
  },
  Strict,
);
export type TimeTriggerSpec = Static<typeof TimeTriggerSpec>;

/** Written by the scheduler only: what it follows, and the last run. */
export const TimeTriggerStatus = Type.Object(
  {
    /** The spec generation the scheduler follows. */
    observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
    /** Since when that generation's schedule has been followed: a due time after it is owed one run. */
    activeSince: Type.Optional(Type.String({ maxLength: 64 })),
    /** The due time of the last run (RFC 3339): claimed before the call, so it is never run twice. */
    lastFireTime: Type.Optional(Type.String({ maxLength: 64 })),
    /** How the last run went: `succeeded` (a 2xx answer), `failed`, or `running` while the call is under way. */
    lastOutcome: Type.Optional(Type.Union([Type.Literal('running'), Type.Literal('succeeded'), Type.Literal('failed')])),
    /** The HTTP status the function answered the last run with (0: no answer). */
    lastStatusCode: Type.Optional(Type.Integer({ minimum: 0, maximum: 999 })),
    lastDurationMs: Type.Optional(Type.Integer({ minimum: 0 })),
    /** Why the last run failed; empty after a run that succeeded. */
    lastError: Type.Optional(Type.String({ maxLength: 4096 })),
  },
  Strict,
);
export type TimeTriggerStatus = Static<typeof TimeTriggerStatus>;
export type MessageQueueTriggerState = (typeof MQT_STATES)[number];

/**
 * What the trigger manager last said of the trigger, written only when it
 * changes (never per message). Empty until the trigger manager has picked
 * the trigger up.
 */
export const MessageQueueTriggerStatus = Type.Object(
  {
    state: Type.Optional(
      Type.Union(
        MQT_STATES.map((s) => Type.Literal(s)),
        { description: 'consuming; waiting for something it needs (a broker configured for its type, its secret); error: its broker failed it and it retries. Absent until the trigger manager picked the trigger up' },
      ),
    ),
    message: Type.Optional(Type.String({ maxLength: 4096, description: 'waiting: what for (naming the install values to set); error: the error' })),
    lastTransitionTime: Type.Optional(Type.String({ description: 'When the trigger came to this state (RFC 3339)' })),
    lastError: Type.Optional(Type.String({ maxLength: 4096, description: 'The last error its broker gave it, kept after it recovers' })),
    lastErrorTime: Type.Optional(Type.String({ description: 'When that error happened (RFC 3339)' })),
    observedGeneration: Type.Optional(Type.Integer({ minimum: 0, description: 'The metadata.generation (spec) the state is about' })),
  },
  { ...Strict, description: "What the trigger manager last said of the trigger, written when it changes (never per message). A client's copy is ignored." },
);
export type MessageQueueTriggerStatus = Static<typeof MessageQueueTriggerStatus>;

// ---- Secret / ConfigMap --------------------------------------------------------

/** Keys as in Kubernetes: alphanumerics, '-', '_' and '.'. */
export const DataMap = Type.Record(Type.String({ pattern: '^[-._a-zA-Z0-9]+$', maxLength: 253 }), Type.String());

// ---- CanaryConfig --------------------------------------------------------------

/** Fission's field names: the canary controller moves `trigger`'s weights from `oldfunction` to `newfunction`. */
export const CanaryConfigSpec = Type.Object(
  {
    /** An HTTPTrigger of this namespace whose functionref weighs both functions. */
    trigger: Type.String({ minLength: 1, maxLength: DNS1123_MAX, pattern: DNS1123_LABEL }),
    newfunction: Type.String({ minLength: 1, maxLength: DNS1123_MAX, pattern: DNS1123_LABEL }),
    oldfunction: Type.String({ minLength: 1, maxLength: DNS1123_MAX, pattern: DNS1123_LABEL }),
    /** Percent of the traffic moved to the new function at each step. */
    weightincrement: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    /** Time between two steps, as Go writes durations (`30s`, `2m`, `1h30m`): at least 1s, at most 720h. */
    duration: Type.Optional(Type.String({ minLength: 1, maxLength: 64, default: '2m' })),
    /** Percent of the new function's answers over one interval that may be 5xx; above it, the canary is rolled back. */
    failurethreshold: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, default: 10 })),
    failureType: Type.Optional(Type.Union(CANARY_FAILURE_TYPES.map((t) => Type.Literal(t)), { default: 'status-code' })),
  },
  Strict,
);
export type CanaryConfigSpec = Static<typeof CanaryConfigSpec>;
export type CanaryStatusValue = (typeof CANARY_STATUSES)[number];

/** Written by the canary controller only; a create or replace keeps the stored one. */
export const CanaryConfigStatus = Type.Object(
  {
    status: Type.Optional(Type.Union(CANARY_STATUSES.map((s) => Type.Literal(s)))),
    /** What the controller did last and why, for people. */
    message: Type.Optional(Type.String({ maxLength: 1024 })),
    /** The new function's 5xx answers, in percent of its requests, over the last interval checked. */
    failureRate: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })),
    /** The requests that rate was taken over. */
    requests: Type.Optional(Type.Integer({ minimum: 0 })),
    /** The new function's weight as the controller last set it (or found it when it took the canary up). */
    newWeight: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
    /** When the weights last moved (or the rollout began): the next step is one interval later. */
    lastStepTime: Type.Optional(Type.String({ maxLength: 64 })),
    /** The generation (spec) this status is for; a newer spec is a new rollout. */
    observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  Strict,
);
export type CanaryConfigStatus = Static<typeof CanaryConfigStatus>;

// ---- Objects -------------------------------------------------------------------

function resourceSchema<K extends string, S extends TSchema>(kind: K, spec: S) {
  return Type.Object(
    {
      apiVersion: Type.Optional(ApiVersion),
      kind: Type.Optional(Type.Literal(kind)),
      metadata: ObjectMeta,
      spec,
    },
    { ...Strict, $id: kind },
  );
}
/** A kind whose `status` only the system writes. */
function resourceWithStatus<K extends string, S extends TSchema, T extends TSchema>(kind: K, spec: S, status: T) {
  return Type.Object(
    {
      apiVersion: Type.Optional(ApiVersion),
      kind: Type.Optional(Type.Literal(kind)),
      metadata: ObjectMeta,
      spec,
      status: Type.Optional(status),
    },
    { ...Strict, $id: kind },
  );
}

export const EnvironmentSchema = resourceSchema('Environment', EnvironmentSpec);
export const FunctionSchema = resourceSchema('Function', FunctionSpec);
export const HTTPTriggerSchema = resourceSchema('HTTPTrigger', HTTPTriggerSpec);
export const MessageQueueTriggerSchema = resourceWithStatus('MessageQueueTrigger', MessageQueueTriggerSpec, MessageQueueTriggerStatus);
export const PackageSchema = resourceWithStatus('Package', PackageSpec, PackageStatus);
function dataSchema<K extends string>(kind: K) {
  return Type.Object(
    {
      apiVersion: Type.Optional(ApiVersion),
      kind: Type.Optional(Type.Literal(kind)),
      metadata: ObjectMeta,
      data: Type.Optional(DataMap),
    },
    { ...Strict, $id: kind },
  );
}
export const TimeTriggerSchema = Type.Object(
  {
    apiVersion: Type.Optional(ApiVersion),
    kind: Type.Optional(Type.Literal('TimeTrigger')),
    metadata: ObjectMeta,
    spec: TimeTriggerSpec,
    status: Type.Optional(TimeTriggerStatus),
  },
  { ...Strict, $id: 'TimeTrigger' },
);
export const CanaryConfigSchema = Type.Object(
  {
    apiVersion: Type.Optional(ApiVersion),
    kind: Type.Optional(Type.Literal('CanaryConfig')),
    metadata: ObjectMeta,
    spec: CanaryConfigSpec,
    status: Type.Optional(CanaryConfigStatus),
  },
  { ...Strict, $id: 'CanaryConfig' },
);
export const SecretSchema = dataSchema('Secret');
export const ConfigMapSchema = dataSchema('ConfigMap');


interface Stored<K extends KindName> {
  apiVersion: string;
  kind: K;
  metadata: StoredMeta;
}
export interface Environment extends Stored<'Environment'> {
  spec: EnvironmentSpec;
}
export interface FunctionResource extends Stored<'Function'> {
  spec: FunctionSpec;
}
export interface Package extends Stored<'Package'> {
  spec: PackageSpec;
  status?: PackageStatus;
}
export interface HTTPTrigger extends Stored<'HTTPTrigger'> {
  spec: HTTPTriggerSpec;
}
export interface MessageQueueTrigger extends Stored<'MessageQueueTrigger'> {
  spec: MessageQueueTriggerSpec;
  status?: MessageQueueTriggerStatus;
}
export interface TimeTrigger extends Stored<'TimeTrigger'> {
  spec: TimeTriggerSpec;
  status?: TimeTriggerStatus;
}
export interface Secret extends Stored<'Secret'> {
  data?: Record<string, string>;
}
export interface ConfigMap extends Stored<'ConfigMap'> {
  data?: Record<string, string>;
}

export interface CanaryConfig extends Stored<'CanaryConfig'> {
  spec: CanaryConfigSpec;
  status?: CanaryConfigStatus;
}

export interface KindMap {
  Environment: Environment;
  Function: FunctionResource;
  Package: Package;
  HTTPTrigger: HTTPTrigger;
  MessageQueueTrigger: MessageQueueTrigger;
  Secret: Secret;
  ConfigMap: ConfigMap;
  TimeTrigger: TimeTrigger;
  CanaryConfig: CanaryConfig;
}
export type AnyResource = KindMap[KindName];

export interface KindInfo {
  kind: KindName;
  /** URL segment and table name. */
  plural: string;
  schema: TSchema;
  /** Whether the object carries a `status` that only the system writes. */
  hasStatus: boolean;
  /** The schema of that status (the body of `PUT .../status`). */
  /** That status's schema (the body of PUT .../status). */
  statusSchema?: TSchema;
}

export const KINDS: Record<KindName, KindInfo> = {
  Environment: { kind: 'Environment', plural: KIND_PLURALS.Environment, schema: EnvironmentSchema, hasStatus: false },
  Function: { kind: 'Function', plural: KIND_PLURALS.Function, schema: FunctionSchema, hasStatus: false },
  Package: { kind: 'Package', plural: KIND_PLURALS.Package, schema: PackageSchema, hasStatus: true, statusSchema: PackageStatus },
  HTTPTrigger: { kind: 'HTTPTrigger', plural: KIND_PLURALS.HTTPTrigger, schema: HTTPTriggerSchema, hasStatus: false },
  MessageQueueTrigger: {
    kind: 'MessageQueueTrigger',
    plural: KIND_PLURALS.MessageQueueTrigger,
    schema: MessageQueueTriggerSchema,
    hasStatus: true,
    statusSchema: MessageQueueTriggerStatus,
  },
  Secret: { kind: 'Secret', plural: KIND_PLURALS.Secret, schema: SecretSchema, hasStatus: false },
  ConfigMap: { kind: 'ConfigMap', plural: KIND_PLURALS.ConfigMap, schema: ConfigMapSchema, hasStatus: false },
  TimeTrigger: { kind: 'TimeTrigger', plural: KIND_PLURALS.TimeTrigger, schema: TimeTriggerSchema, hasStatus: true, statusSchema: TimeTriggerStatus },
  CanaryConfig: { kind: 'CanaryConfig', plural: KIND_PLURALS.CanaryConfig, schema: CanaryConfigSchema, hasStatus: true, statusSchema: CanaryConfigStatus },
};

const BY_PLURAL = new Map(Object.values(KINDS).map((k) => [k.plural, k]));

export function kindByPlural(plural: string): KindInfo | undefined {
  return BY_PLURAL.get(plural);
}

export function isKindName(name: unknown): name is KindName {
  return typeof name === 'string' && Object.hasOwn(KINDS, name);
}
