// Validation at the boundary: schema first (names the field), then the rules a
// schema cannot say. Returns a normalized object with defaults applied; throws
// a FlintError (FLINT_ERR_VALIDATION) naming the first offending field.
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import { canaryIntervalProblem } from './duration.ts';
import { ARCHIVE_URL_PREFIX, buildCommandProblem, MAX_LITERAL_BYTES, SHA256_HEX, storedArchiveSha } from './build-command.ts';
import { scheduleProblem } from './cron.ts';
import { FlintError, invalid } from './errors.ts';
import { kafkaMetadataProblem } from './kafka-trigger.ts';
import { natsMetadataProblem } from './nats-trigger.ts';
import { rabbitMetadataProblem, redisMetadataProblem } from './queue-trigger.ts';
import { builderForImage, KNOWN_BUILDER_IMAGES, KNOWN_RUNTIME_IMAGES, runtimeForImage } from './images.ts';
import {
  type AnyResource,
  type CanaryConfig,
  type Environment,
  type FunctionReference,
  type FunctionResource,
  type HTTPTrigger,
  KINDS,
  type KindName,
  type MessageQueueTrigger,
  type Package,
  type TimeTrigger,
} from './kinds.ts';
import { API_VERSION, DEFAULT_NAMESPACE, FISSION_API_VERSION } from './meta.ts';
import { compileTemplate } from './route-template.ts';

export interface ValidateOptions {
  /** Local mode: images must name a built-in runtime. */
  localImages?: boolean;
  /** Paths the router owns; a route may not claim them. */
  reservedPaths?: readonly string[];
}

const compiled = new Map<KindName, TypeCheck<any>>();
function checker(kind: KindName): TypeCheck<any> {
  let c = compiled.get(kind);
  if (!c) {
    c = TypeCompiler.Compile(KINDS[kind].schema);
    compiled.set(kind, c);
  }
  return c;
}

function fieldOf(path: string): string {
  return path.replace(/^\//, '').replace(/\//g, '.') || '(root)';
}

/** Most useful message for a TypeBox error: unions report every branch, keep it short. */
export function describeSchemaError(e: { message: string; schema: any; value: unknown; type: number }): string {
  if (e.schema?.anyOf?.every((s: any) => 'const' in s)) {
    return `must be one of ${e.schema.anyOf.map((s: any) => JSON.stringify(s.const)).join(', ')}, got ${JSON.stringify(e.value)}`;
  }
  if (e.message === 'Unexpected property') return 'unknown field';
  if (e.schema?.pattern && typeof e.value === 'string' && e.schema.pattern.startsWith('^[a-z0-9]([-a-z0-9]*')) {
    return `'${e.value}' is not a valid name: use lowercase letters, digits and '-', starting and ending with a letter or digit (at most 63 characters)`;
  }
  if (e.schema?.pattern && typeof e.value === 'string' && e.schema.description) return `'${e.value}' is not valid here: ${e.schema.description}`;
  return e.message.charAt(0).toLowerCase() + e.message.slice(1);
}

export const MAX_DATA_BYTES = 1024 * 1024;

export function validateResource(kind: KindName, input: unknown, opts: ValidateOptions = {}): AnyResource {
  if (!input || typeof input !== 'object' || Array.isArray(input)) {
    throw new FlintError('FLINT_ERR_VALIDATION', `body must be a JSON object describing a ${kind}`);
  }
  const raw = input as Record<string, unknown>;
  if (raw.kind !== undefined && raw.kind !== kind) {
    throw invalid('kind', `expected '${kind}', got ${JSON.stringify(raw.kind)}`);
  }
  if (raw.apiVersion !== undefined && raw.apiVersion !== API_VERSION && raw.apiVersion !== FISSION_API_VERSION) {
    throw invalid('apiVersion', `expected '${API_VERSION}', got ${JSON.stringify(raw.apiVersion)}`);
  }
  const check = checker(kind);
  const first = check.Errors(raw).First();
  if (first) {
    const field = fieldOf(first.path);
    throw invalid(field, describeSchemaError(first as any));
  }
  const obj = Value.Default(KINDS[kind].schema, structuredClone(raw)) as any;
  obj.apiVersion = API_VERSION;
  obj.kind = kind;
  obj.metadata.namespace ??= DEFAULT_NAMESPACE;
  RULES[kind]?.(obj, opts);
  return obj as AnyResource;
}

type Rule = (obj: any, opts: ValidateOptions) => void;

const RULES: Partial<Record<KindName, Rule>> = {
  Environment(env: Environment, opts) {
    const cmd = env.spec.builder?.command;
    if (cmd !== undefined) {
      const problem = buildCommandProblem(cmd);
      if (problem) throw invalid('spec.builder.command', problem);
    }
    if (!opts.localImages) return;
    if (!runtimeForImage(env.spec.runtime.image)) {
      throw invalid(
        'spec.runtime.image',
        `unknown image '${env.spec.runtime.image}': local mode runs built-in runtimes only, use one of ${KNOWN_RUNTIME_IMAGES.join(', ')}`,
      );
    }
    const b = env.spec.builder?.image;
    if (b && !builderForImage(b)) {
      throw invalid('spec.builder.image', `unknown builder image '${b}': use one of ${KNOWN_BUILDER_IMAGES.join(', ')}`);
    }
  },

  Function(fn: FunctionResource) {
    const es = fn.spec.invokeStrategy?.executionStrategy;
    if (es && es.minScale !== undefined && es.maxScale !== undefined && es.minScale > es.maxScale) {
      throw invalid(
        'spec.invokeStrategy.executionStrategy.minScale',
        `minscale (${es.minScale}) can not be greater than maxscale (${es.maxScale})`,
      );
    }
    if (es?.executorType === 'newdeploy' && es.maxScale === 0) {
      throw invalid('spec.invokeStrategy.executionStrategy.maxScale', 'maxscale must be greater than 0');
    }
  },

  Package(pkg: Package) {
    const { source, deployment } = pkg.spec;
    if (!source && !deployment) throw invalid('spec', 'a package needs a source or a deployment archive');
    for (const [name, a] of [
      ['source', source],
      ['deployment', deployment],
    ] as const) {
      if (!a) continue;
      if (a.type === 'literal' && a.literal === undefined) throw invalid(`spec.${name}.literal`, "required when type is 'literal'");
      if (a.type === 'url' && !a.url) throw invalid(`spec.${name}.url`, "required when type is 'url'");
      if (a.literal !== undefined && !/^[A-Za-z0-9+/]*={0,2}$/.test(a.literal)) {
        throw invalid(`spec.${name}.literal`, 'must be base64');
      }
      if (a.literal !== undefined && Math.floor((a.literal.length * 3) / 4) > MAX_LITERAL_BYTES + 2) {
        throw invalid(`spec.${name}.literal`, `embedded archives are limited to ${MAX_LITERAL_BYTES / 1024} KiB: upload larger ones (POST /v1/archives) and refer to them by url`);
      }
      if (a.type === 'url' && a.url) checkArchiveUrl(`spec.${name}.url`, a.url);
      if (a.checksum && (a.checksum.type !== 'sha256' || !SHA256_HEX.test(a.checksum.sum))) {
        throw invalid(`spec.${name}.checksum`, 'must be {type: "sha256", sum: <64 lowercase hex digits>}');
      }
      if (a.type === 'url' && a.url && a.checksum) {
        const sha = storedArchiveSha(a.url);
        if (sha && sha !== a.checksum.sum) throw invalid(`spec.${name}.checksum.sum`, `does not match the stored archive in the url (${sha})`);
      }
    }
    if (pkg.spec.buildcmd !== undefined) {
      const problem = buildCommandProblem(pkg.spec.buildcmd);
      if (problem) throw invalid('spec.buildcmd', problem);
    }
  },

  HTTPTrigger(ht: HTTPTrigger, opts) {
    const s = ht.spec;
    checkFunctionRef(s.functionref);
    const usePrefix = s.prefix !== undefined && s.prefix !== '';
    if (!usePrefix && !s.relativeurl) throw invalid('spec.relativeurl', 'you need to supply either prefix or relativeurl');
    const field = usePrefix ? 'spec.prefix' : 'spec.relativeurl';
    const path = (usePrefix ? s.prefix : s.relativeurl) as string;
    checkRoutePath(field, path, opts.reservedPaths ?? []);
    compileTemplate(path, { prefix: usePrefix, field });
    if (s.host && !/^(\*\.)?[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]{1,5})?$/.test(s.host)) {
      throw invalid('spec.host', `'${s.host}' is not a valid host name`);
    }
    const ic = s.ingressconfig;
    if (ic?.path !== undefined && ic.path !== '' && !ic.path.startsWith('/')) {
      throw invalid('spec.ingressconfig.path', `must be an absolute path starting with '/', got '${ic.path}'`);
    }
    if (ic?.host && ic.host !== '*' && !/^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(ic.host)) {
      throw invalid('spec.ingressconfig.host', `'${ic.host}' is not '*' or a DNS name`);
    }
  },

  MessageQueueTrigger(mqt: MessageQueueTrigger) {
    const s = mqt.spec;
    // A message goes to one function; weights split HTTP traffic only.
    if ((s.functionref.type ?? 'name') !== 'name') throw invalid('spec.functionref.type', "a message-queue trigger calls one function: use type 'name' with a name");
    checkFunctionRef(s.functionref);
    for (const f of ['topic', 'respTopic', 'errorTopic'] as const) {
      const t = s[f];
      if (t === undefined || (t === '' && f !== 'topic')) continue;
      if (!/^[a-zA-Z0-9._-]+$/.test(t) || t === '.' || t === '..') {
        throw invalid(`spec.${f}`, `'${t}' is not a valid topic name: use letters, digits, '.', '_' and '-'`);
      }
    }
    if (s.respTopic && s.respTopic === s.topic) throw invalid('spec.respTopic', 'must differ from the input topic');
    if (s.errorTopic && s.errorTopic === s.topic) throw invalid('spec.errorTopic', 'must differ from the input topic');
    if (s.mqtkind === 'fission' && s.messageQueueType !== 'kafka') {
      throw invalid('spec.mqtkind', `'fission' (the classic built-in consumer) takes only kafka, not ${s.messageQueueType}: use 'keda'`);
    }
    if (s.minReplicaCount !== undefined && s.maxReplicaCount !== undefined && s.minReplicaCount > s.maxReplicaCount) {
      throw invalid('spec.minReplicaCount', `${s.minReplicaCount} is more than maxReplicaCount ${s.maxReplicaCount}`);
    }
    const problem =
      s.messageQueueType === 'kafka'
        ? kafkaMetadataProblem(s.metadata, s.topic)
        : s.messageQueueType === 'rabbitmq'
          ? rabbitMetadataProblem(s.metadata, s.topic)
          : s.messageQueueType === 'redis'
            ? redisMetadataProblem(s.metadata, s.topic)
            : natsMetadataProblem(s.metadata);
    if (problem !== undefined) throw invalid(problem.field, problem.message);
  },

  TimeTrigger(tt: TimeTrigger) {
    const s = tt.spec;
    const problem = scheduleProblem(s.cron);
    if (problem !== undefined) throw invalid('spec.cron', `'${s.cron}' is not a valid schedule: ${problem}`);
    // One call per due time, to one function.
    if ((s.functionref.type ?? 'name') !== 'name') throw invalid('spec.functionref.type', "a time trigger calls one function: use type 'name' with a name");
    checkFunctionRef(s.functionref);
    if (!s.method) s.method = 'POST';
    if (s.method === 'CONNECT' || s.method === 'TRACE') throw invalid('spec.method', `a time trigger cannot call a function with ${s.method}`);
    if (!s.subpath) s.subpath = '/';
    if (!s.subpath.startsWith('/')) s.subpath = `/${s.subpath}`;
    // Appended to the function's internal path as it is: a path (and query) of plain URL characters.
    if (!/^\/[-A-Za-z0-9._~!$&'()*+,;=:@%/?]*$/.test(s.subpath)) {
      throw invalid('spec.subpath', `'${s.subpath}' is not a URL path: use letters, digits, '/' and URL punctuation, with %-escapes for anything else`);
    }
    if (s.subpath.split('?')[0].split('/').includes('..')) throw invalid('spec.subpath', "must not contain a '..' segment");
  },

  Secret: checkDataSize,
  ConfigMap: checkDataSize,

  CanaryConfig(cc: CanaryConfig) {
    const s = cc.spec;
    if (s.newfunction === s.oldfunction) throw invalid('spec.newfunction', `must differ from spec.oldfunction ('${s.oldfunction}')`);
    const problem = canaryIntervalProblem(s.duration ?? '2m');
    if (problem) throw invalid('spec.duration', problem);
  },
};

function checkDataSize(obj: { data?: Record<string, string> }) {
  let size = 0;
  for (const [k, v] of Object.entries(obj.data ?? {})) {
    if (!/^[-._a-zA-Z0-9]{1,253}$/.test(k)) throw invalid(`data.${k}`, "keys may hold only letters, digits, '-', '_' and '.'");
    // Each key is a file's name in the instance's secrets or configs directory.
    if (k === '.' || k === '..') throw invalid(`data.${k}`, "a key may not be '.' or '..'");
    size += k.length + Buffer.byteLength(v);
  }
  if (size > MAX_DATA_BYTES) throw invalid('data', `total size ${size} bytes exceeds the limit of ${MAX_DATA_BYTES} bytes`);
}

function checkFunctionRef(ref: FunctionReference) {
  if ((ref.type ?? 'name') === 'name') {
    if (!ref.name) throw invalid('spec.functionref.name', 'a function name is required');
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ref.name)) throw invalid('spec.functionref.name', `'${ref.name}' is not a valid function name`);
    return;
  }
  const weights = Object.entries(ref.functionweights ?? {});
  if (weights.length === 0) throw invalid('spec.functionref.functionweights', 'at least one weighted function is required');
  const total = weights.reduce((a, [, w]) => a + w, 0);
  if (total !== 100) throw invalid('spec.functionref.functionweights', `weights must add up to 100, got ${total}`);
}

function checkRoutePath(field: string, path: string, reserved: readonly string[]) {
  if (!path.startsWith('/')) throw invalid(field, `must start with '/', got '${path}'`);
  if (path === '/') throw invalid(field, 'url with only root path is not allowed');
  if (path.split('/').includes('..')) throw invalid(field, "must not contain a '..' segment");
  if (path.startsWith('/flint-function/') || path === '/flint-function') {
    throw invalid(field, "paths under '/flint-function/' are reserved for the internal function path");
  }
  for (const r of reserved) {
    if (path === r) throw invalid(field, `'${path}' is reserved by the router`);
  }
}

function checkArchiveUrl(field: string, url: string): void {
  if (url.startsWith(ARCHIVE_URL_PREFIX)) {
    if (!storedArchiveSha(url)) throw invalid(field, `'${url}' is not a stored archive: expected ${ARCHIVE_URL_PREFIX}<sha256>`);
    return;
  }
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw invalid(field, `'${url}' is neither a stored archive (${ARCHIVE_URL_PREFIX}<sha256>) nor an http(s) URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw invalid(field, `unsupported URL scheme '${u.protocol}': use http or https`);
}
