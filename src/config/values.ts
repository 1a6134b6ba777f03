// Install values: the chart's values.yaml is the embedded default; `-f` files
// and `--set a.b=c` override it. Everything is checked once here, loudly:
// an unknown key or a wrong type stops start-up naming the key.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Static, type TObject, type TSchema, Type } from '@sinclair/typebox';
import { FlintError } from '../api/errors.ts';
import { CPU_LIST_PATTERN, cpuListProblem } from '../sandbox/cpu-affinity.ts';

const Strict = { additionalProperties: false } as const;
const Port = Type.Integer({ minimum: 0, maximum: 65535 });
const Host = Type.String({ minLength: 1 });
// Local mode: the CPUs a process runs on, as taskset writes them ('' leaves it to the scheduler).
const Cpus = Type.String({ pattern: CPU_LIST_PATTERN });
// Sockets of a data-plane listener, in one SO_REUSEPORT group (src/limits/listener-group.ts).
const AcceptSockets = Type.Integer({ minimum: 1, maximum: 1024 });
// Every listener's caps and timeouts (src/limits): 0 caps are derived from the fd limit.
const ListenerLimits = {
  maxConnections: Type.Integer({ minimum: 0, maximum: 10_000_000 }),
  maxConnectionsPerClient: Type.Integer({ minimum: 0, maximum: 10_000_000 }),
  headersTimeoutSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 3600 }),
  keepAliveTimeoutSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 3600 }),
};

export const ValuesSchema = Type.Object(
  {
    mode: Type.Union([Type.Literal('local'), Type.Literal('kubernetes')]),
    role: Type.Union([Type.Literal('all'), Type.Literal('controller'), Type.Literal('executor'), Type.Literal('router')]),
    dataDir: Type.String({ minLength: 1 }),
    logLevel: Type.Union(['trace', 'debug', 'info', 'warn', 'error', 'silent'].map((l) => Type.Literal(l))),
    controller: Type.Object({ host: Host, port: Port, acceptSockets: AcceptSockets, ...ListenerLimits }, Strict),
    router: Type.Object(
      { host: Host, port: Port, acceptSockets: AcceptSockets, forwardAuthorization: Type.Boolean(), accessLog: Type.Boolean(), drainSeconds: Type.Number({ minimum: 0, maximum: 600 }),
        cpus: Cpus,
        replicas: Type.Integer({ minimum: 1, maximum: 1000 }),
        autoscaling: Type.Object(
          {
            enabled: Type.Boolean(),
            minReplicas: Type.Integer({ minimum: 1, maximum: 1000 }),
            maxReplicas: Type.Integer({ minimum: 1, maximum: 1000 }),
            targetCPUUtilizationPercentage: Type.Integer({ minimum: 1, maximum: 1000 }),
          },
          Strict,
        ),
        ...ListenerLimits,
      },
      Strict,
    ),
    ingress: Type.Object(
      {
        enabled: Type.Boolean(),
        provider: Type.Union([Type.Literal('builtin'), Type.Literal('nginx'), Type.Literal('kubernetes')]),
        host: Host,
        port: Port,
        httpsPort: Port,
        acceptSockets: AcceptSockets,
        ...ListenerLimits,
      },
      Strict,
    ),
    executor: Type.Object(
      {
        sandbox: Type.Union([Type.Literal('bubblewrap'), Type.Literal('none')]),
        memoryMB: Type.Integer({ minimum: 16, maximum: 65536 }),
        poolSize: Type.Integer({ minimum: 0, maximum: 1000 }),
        concurrentStarts: Type.Integer({ minimum: 0, maximum: 1000 }),
        firstCallWindowSeconds: Type.Integer({ minimum: 0, maximum: 86_400 }),
        reapIntervalSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 3600 }),
        maxInstances: Type.Integer({ minimum: 0, maximum: 100_000 }),
        maxMemoryMB: Type.Integer({ minimum: 0, maximum: 16_777_216 }),
        maxQueueLength: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
        queueTimeoutSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 3600 }),
        egressSubnet: Type.String({ pattern: '^[0-9]{1,3}(\\.[0-9]{1,3}){3}/[0-9]{1,2}$' }),
        host: Host,
        port: Port,
        advertiseHost: Type.String(),
        replicas: Type.Integer({ minimum: 1, maximum: 100 }),
        workerCpus: Cpus,
      },
      Strict,
    ),
    builder: Type.Object(
      {
        timeoutSeconds: Type.Integer({ minimum: 1, maximum: 86400 }),
        memoryMB: Type.Integer({ minimum: 64, maximum: 262144 }),
        concurrency: Type.Integer({ minimum: 1, maximum: 64 }),
      },
      Strict,
    ),
    archives: Type.Object(
      {
        maxUploadMB: Type.Integer({ minimum: 1, maximum: 65536 }),
        maxUnpackedMB: Type.Integer({ minimum: 1, maximum: 262144 }),
        gcGraceMinutes: Type.Number({ minimum: 0, maximum: 10080 }),
      },
      Strict,
    ),
    authentication: Type.Object(
      {
        enabled: Type.Boolean(),
        authUriPath: Type.String({ pattern: '^/[^\\s?#]*$' }),
        authUsername: Type.String({ minLength: 1 }),
        jwtSigningKey: Type.String(),
        jwtExpiryTime: Type.Integer({ minimum: 1, maximum: 31536000 }),
        jwtIssuer: Type.String({ minLength: 1 }),
      },
      Strict,
    ),
    enableIstio: Type.Boolean(),
    kubernetes: Type.Object(
      {
        apiServer: Type.String({ pattern: '^(https?://.+)?$' }),
        tokenFile: Type.String(),
        caFile: Type.String(),
        insecureSkipTLSVerify: Type.Boolean(),
        functionNamespace: Type.String({ minLength: 1, maxLength: 63, pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' }),
        fetcherImage: Type.String({ minLength: 1 }),
        controllerUrl: Type.String({ pattern: '^(https?://.+)?$' }),
        routerUrl: Type.String({ pattern: '^(https?://.+)?$' }),
        leaderElection: Type.Object(
          {
            leaseDurationSeconds: Type.Number({ minimum: 1, maximum: 3600 }),
            retryPeriodSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 600 }),
          },
          Strict,
        ),
      },
      Strict,
    ),
    // The Helm chart's own settings: read by its templates, not by `flint server`.
    chart: Type.Object(
      {
        image: Type.Object(
          {
            repository: Type.String({ minLength: 1 }),
            tag: Type.String(),
            pullPolicy: Type.Union([Type.Literal('Always'), Type.Literal('IfNotPresent'), Type.Literal('Never')]),
          },
          Strict,
        ),
        routerServiceType: Type.Union([Type.Literal('ClusterIP'), Type.Literal('NodePort'), Type.Literal('LoadBalancer')]),
        listenOnPodIP: Type.Boolean(),
        persistence: Type.Object(
          {
            enabled: Type.Boolean(),
            existingClaim: Type.String({ pattern: '^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$', maxLength: 253 }),
            size: Type.String({ pattern: '^[0-9]+(Ki|Mi|Gi|Ti)$' }),
            storageClass: Type.String(),
          },
          Strict,
        ),
      },
      Strict,
    ),
    kafka: Type.Object({ enabled: Type.Boolean(), brokers: Type.String() }, Strict),
    nats: Type.Object({ enabled: Type.Boolean(), servers: Type.String() }, Strict),
    rabbitmq: Type.Object({ enabled: Type.Boolean(), url: Type.String({ pattern: '^amqps?://' }) }, Strict),
    redis: Type.Object({ enabled: Type.Boolean(), url: Type.String({ pattern: '^rediss?://' }) }, Strict),
    tracing: Type.Object(
      {
        otlpEndpoint: Type.String({ pattern: '^(https?://[^\\s]+)?$' }),
        serviceName: Type.String({ minLength: 1, maxLength: 255 }),
        sampleRatio: Type.Number({ minimum: 0, maximum: 1 }),
      },
      Strict,
    ),
  },
  Strict,
);
export type Values = Static<typeof ValuesSchema>;

export const DEFAULT_VALUES_FILE = fileURLToPath(new URL('../../charts/flint/values.yaml', import.meta.url));

function configError(key: string, message: string): FlintError {
  return new FlintError('FLINT_ERR_CONFIG', `install value '${key}' ${message}`, { field: key });
}

function typeName(s: TSchema): string {
  if (s.anyOf) return `one of ${s.anyOf.map((x: TSchema) => JSON.stringify(x.const)).join(', ')}`;
  return s.type === 'integer' ? 'an integer' : s.type === 'object' ? 'a map' : `a ${s.type}`;
}

/** Checks one value against its schema node, naming the key on failure. */
function checkNode(schema: TSchema, value: unknown, key: string): void {
  if (schema.type === 'object') {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw configError(key, `must be a map, got ${JSON.stringify(value)}`);
    const props = (schema as TObject).properties;
    for (const [k, v] of Object.entries(value)) {
      const sub = key ? `${key}.${k}` : k;
      if (!Object.hasOwn(props, k)) throw new FlintError('FLINT_ERR_CONFIG', `unknown install value '${sub}'`, { field: sub });
      checkNode(props[k], v, sub);
    }
    return;
  }
  if (schema.anyOf) {
    if (!schema.anyOf.some((x: TSchema) => x.const === value)) throw configError(key, `must be ${typeName(schema)}, got ${JSON.stringify(value)}`);
    return;
  }
  const ok =
    (schema.type === 'string' && typeof value === 'string') ||
    (schema.type === 'boolean' && typeof value === 'boolean') ||
    (schema.type === 'integer' && Number.isInteger(value)) ||
    (schema.type === 'number' && typeof value === 'number' && Number.isFinite(value));
  if (!ok) throw configError(key, `must be ${typeName(schema)}, got ${JSON.stringify(value)}`);
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) throw configError(key, `must be at least ${schema.minimum}, got ${value}`);
    if (schema.maximum !== undefined && value > schema.maximum) throw configError(key, `must be at most ${schema.maximum}, got ${value}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) throw configError(key, `must be more than ${schema.exclusiveMinimum}, got ${value}`);
  }
  if (typeof value === 'string') {
    if (schema.minLength !== undefined && value.length < schema.minLength) throw configError(key, 'must not be empty');
    if (schema.pattern && !new RegExp(schema.pattern).test(value)) throw configError(key, `has a bad value ${JSON.stringify(value)}`);
  }
}

function schemaAt(key: string): TSchema {
  let node: TSchema = ValuesSchema;
  for (const part of key.split('.')) {
    const props = node.type === 'object' ? (node as TObject).properties : undefined;
    if (!props || !Object.hasOwn(props, part)) throw new FlintError('FLINT_ERR_CONFIG', `unknown install value '${key}'`, { field: key });
    node = props[part];
  }
  return node;
}

/** Turns the text of `--set key=text` into the key's type. */
function coerce(schema: TSchema, key: string, text: string): unknown {
  if (schema.type === 'boolean') {
    if (text === 'true') return true;
    if (text === 'false') return false;
    throw configError(key, `must be true or false, got '${text}'`);
  }
  if (schema.type === 'integer' || schema.type === 'number') {
    const n = Number(text);
    if (text.trim() === '' || Number.isNaN(n)) throw configError(key, `must be ${typeName(schema)}, got '${text}'`);
    return n;
  }
  if (schema.type === 'object') throw configError(key, 'is a map: set its keys one by one (a.b=c)');
  return text;
}

function merge(into: Record<string, any>, from: Record<string, any>): void {
  for (const [k, v] of Object.entries(from)) {
    if (v && typeof v === 'object' && !Array.isArray(v) && into[k] && typeof into[k] === 'object') merge(into[k], v);
    else into[k] = v;
  }
}

async function readYaml(file: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new FlintError('FLINT_ERR_CONFIG', `cannot read values file '${file}': ${(err as Error).message}`);
  }
  const { parse } = await import('yaml');
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new FlintError('FLINT_ERR_CONFIG', `values file '${file}' is not valid YAML: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new FlintError('FLINT_ERR_CONFIG', `values file '${file}' must hold a map at the top`);
  return doc as Record<string, unknown>;
}

export interface ValuesSources {
  /** `-f` files, applied in order after the defaults. */
  files?: string[];
  /** `--set a.b=c` assignments, applied last. */
  sets?: string[];
}

export async function loadValues(src: ValuesSources = {}): Promise<Values> {
  const values = await readYaml(DEFAULT_VALUES_FILE);
  for (const f of src.files ?? []) {
    const over = await readYaml(f);
    checkNode(ValuesSchema, over, '');
    merge(values, over);
  }
  for (const assignment of src.sets ?? []) {
    const eq = assignment.indexOf('=');
    if (eq <= 0) throw new FlintError('FLINT_ERR_CONFIG', `--set needs key=value, got '${assignment}'`);
    const key = assignment.slice(0, eq).trim();
    const value = coerce(schemaAt(key), key, assignment.slice(eq + 1));
    const parts = key.split('.');
    let node: Record<string, any> = values;
    for (const p of parts.slice(0, -1)) node = node[p] ??= {};
    node[parts[parts.length - 1]] = value;
  }
  checkNode(ValuesSchema, values, '');
  for (const [k, v] of Object.entries(ValuesSchema.properties)) {
    if (!(k in values)) throw configError(k, `is missing (expected ${typeName(v)})`);
  }
  if (values.enableIstio === true && values.mode === 'local') {
    throw new FlintError('FLINT_ERR_CONFIG', "install value 'enableIstio' needs mode=kubernetes: local mode has no service mesh", {
      field: 'enableIstio',
    });
  }
  for (const key of ['router.cpus', 'executor.workerCpus'] as const) {
    const [section, name] = key.split('.');
    const list = (values[section] as Record<string, string>)[name];
    if (list === '') continue;
    if (values.mode !== 'local') throw configError(key, "is for local mode: in kubernetes mode a pod's CPUs are the kubelet's (its CPU manager policy)");
    const problem = cpuListProblem(list);
    if (problem !== undefined) throw configError(key, problem);
  }
  return values as Values;
}
