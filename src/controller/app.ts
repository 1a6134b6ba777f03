// The control-plane HTTP API: CRUD and watch for every kind over the store,
// archive upload and download, package rebuilds, function logs, topic
// read-back, a function's sampled metrics and test calls, the OpenAPI
// document, and the web dashboard's static files at /ui. Every error leaves as JSON
// `{code, message, field?}` with the registry's status.
import swagger from '@fastify/swagger';
import type { TSchema } from '@sinclair/typebox';
import type { FunctionMetricsSource } from '../api/function-metrics.ts';
import type { InstancesSource } from '../api/instances.ts';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { FlintError, invalid, isFlintError } from '../api/errors.ts';
import { describeSchemaError } from '../api/validate.ts';
import type { ArchiveStore } from '../archive/index.ts';
import type { InspectLimits } from '../archive/zip-inspect.ts';
import { type ControllerAuthCheck, isControllerExempt } from '../auth/controller-auth.ts';
import type { TokenIssuer } from '../auth/issuer.ts';
import type { DataLayout } from '../config/layout.ts';
import type { Store } from '../store/store.ts';
import { registerArchiveRoutes } from './archives.ts';
import { registerUi } from '../ui/serve.ts';
import { registerFunctionMetricsRoute } from './function-metrics.ts';
import { registerInfoRoutes, type ServerInfo } from './info.ts';
import { registerInvokeRoute } from './invoke.ts';
import { controllerMetrics, registerMetricsRoute } from './metrics.ts';
import { registerInstanceRoutes } from './instances.ts';
import { type FunctionLogSource, localLogSource, registerLogRoutes } from './logs.ts';
import { addCommonErrors, ErrorBody, OPENAPI_INFO, OPENAPI_INFO_WITH_AUTH, refResolver } from './openapi.ts';
import { registerRebuildRoute } from './rebuild.ts';
import { DEFAULT_ARCHIVE_LIMITS, registerResourceRoutes } from './resources.ts';
import { registerTokenRoute } from './tokens.ts';
import { registerTopicRoutes, type TopicAccess } from './topics.ts';
import { registerWatchRoutes } from './watch.ts';

export interface ControllerOptions {
  store: Store;
  layout: DataLayout;
  logger?: Logger;
  /** What `GET /v1/info` tells clients (router URL, auth settings...). */
  info: () => ServerInfo;
  /** Local mode: environment images must name built-in runtimes. */
  localImages: boolean;
  /** Paths the router owns, refused as route URLs. */
  reservedPaths: readonly string[];
  /** With authentication on: why an Authorization header may not make a request (undefined: it may). */
  authCheck?: ControllerAuthCheck;
  /** With authentication on: issues the tokens of POST /v1/tokens. */
  issueToken?: TokenIssuer;
  /** Broker access for the topic read-back endpoint; absent when no broker is configured. */
  topics?: TopicAccess;
  /** Largest accepted request body. */
  bodyLimit?: number;
  /** Archive storage for uploads and downloads; absent: the archive API answers 503. */
  archives?: ArchiveStore;
  /** Largest archive accepted in one upload (default 512 MiB). */
  maxUploadBytes?: number;
  /** What a package's zip may hold (default 100000 entries, 2 GiB unpacked). */
  archiveLimits?: InspectLimits;
  /** Where `GET /metrics` reads from; the controller adds its own metrics to it. */
  metrics?: Registry;
  /** A function's instances (local mode); absent: the instances route answers 501. */
  instances?: InstancesSource;
  /** Where function logs are read when the executor writes them elsewhere (roles apart); the data directory's otherwise. */
  functionLogs?: FunctionLogSource;
  /** The routers' request counters sampled over the last minutes (the dashboard's charts); absent: the metrics route answers 501. */
  functionMetrics?: FunctionMetricsSource;
}

export const DEFAULT_BODY_LIMIT = 16 * 1024 * 1024;
const DEFAULT_MAX_UPLOAD = 512 * 1024 * 1024;

function toFlintError(err: FastifyError | FlintError | Error): FlintError {
  if (isFlintError(err)) return err;
  const fe = err as FastifyError;
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new FlintError('FLINT_ERR_BAD_JSON', `request body is not valid JSON: ${fe.message}`);
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', 'request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new FlintError('FLINT_ERR_UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json');
    case 'FST_ERR_VALIDATION':
      return new FlintError('FLINT_ERR_VALIDATION', fe.message);
  }
  if (fe.statusCode === 413) return new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', 'request body is too large');
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) return new FlintError('FLINT_ERR_VALIDATION', fe.message);
  return new FlintError('FLINT_ERR_INTERNAL', 'internal error', { cause: err });
}

/** Path parameters and query strings are checked against their route's schema (src/api/params.ts), naming the parameter. */
function parameterCheck(schema: TSchema): (value: unknown) => true | { error: FlintError } {
  const check = TypeCompiler.Compile(schema);
  return (value) => {
    const first = check.Errors(value).First();
    if (!first) return true;
    const name = first.path.replace(/^\//, '').split('/')[0] || '(parameters)';
    return { error: invalid(name, describeSchemaError(first as any)) };
  };
}

/** A fastify route URL (`/v1/namespaces/:namespace/...`) as a regex over request paths. */
function routePattern(url: string): RegExp {
  const source = url
    .split('/')
    .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${source}$`);
}

export async function createController(opts: ControllerOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: opts.logger as FastifyBaseLogger | undefined,
    bodyLimit: opts.bodyLimit ?? DEFAULT_BODY_LIMIT,
    // Bodies are checked by src/api/validate.ts, which names fields the
    // way the rest of Flint does; the route schemas only document them.
    ajv: { customOptions: { strict: false } },
    return503OnClosing: true,
    forceCloseConnections: true,
  });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? () => true : parameterCheck(schema as TSchema)));

  const authCheck = opts.authCheck;
  if (authCheck) {
    app.addHook('onRequest', async (req, reply) => {
      if (isControllerExempt(req.url)) return;
      const refusal = authCheck(req.headers.authorization, { method: req.method, url: req.url, remoteAddress: req.socket.remoteAddress });
      if (refusal === undefined) return;
      if (refusal.retryAfter !== undefined) reply.header('retry-after', String(refusal.retryAfter));
      const code = refusal.status === 429 ? 'FLINT_ERR_TOO_MANY_REQUESTS' : 'FLINT_ERR_UNAUTHORIZED';
      return reply.code(refusal.status).header('www-authenticate', 'Bearer').type('application/json').send(new FlintError(code, refusal.message).toJSON());
    });
  }

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const fe = toFlintError(err);
    if (fe.code === 'FLINT_ERR_INTERNAL') req.log.error({ err }, 'controller request failed');
    reply.code(fe.status).type('application/json').send(fe.toJSON());
  });
  // A path the API has, asked with a method it does not take, is a 405
  // naming the methods it does take; anything else is a 404.
  const routes: { pattern: RegExp; method: string }[] = [];
  app.addHook('onRoute', (route) => {
    addCommonErrors(route, !isControllerExempt(route.url));
    for (const method of [route.method].flat()) routes.push({ pattern: routePattern(route.url), method });
  });
  // Before the body is read: a method the path does not take is refused whatever it sends.
  app.addHook('onRequest', async (req, reply) => {
    if (!req.is404) return;
    const path = req.url.split('?')[0];
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))];
    if (allowed.length === 0) return;
    return reply
      .code(405)
      .header('allow', allowed.join(', '))
      .type('application/json')
      .send(new FlintError('FLINT_ERR_METHOD_NOT_ALLOWED', `${path} does not take ${req.method}: use ${allowed.join(', ')}`).toJSON());
  });
  app.setNotFoundHandler((req, reply) => {
    reply
      .code(404)
      .type('application/json')
      .send(new FlintError('FLINT_ERR_NOT_FOUND', `no API path ${req.method} ${req.url.split('?')[0]}`).toJSON());
  });

  app.addSchema(ErrorBody);
  // The served document says what this server asks: a token only when authentication is on.
  await app.register(swagger, { openapi: authCheck ? OPENAPI_INFO_WITH_AUTH : OPENAPI_INFO, refResolver });
  registerInfoRoutes(app, opts.info);
  registerResourceRoutes(app, opts);
  registerWatchRoutes(app, opts.store);
  registerLogRoutes(app, opts.store, opts.functionLogs ?? localLogSource(opts.layout));
  registerInstanceRoutes(app, opts.store, opts.instances);
  registerFunctionMetricsRoute(app, opts.store, opts.functionMetrics, opts.instances);
  registerInvokeRoute(app, opts.store, () => opts.info().routerUrl, opts.issueToken);
  registerTopicRoutes(app, opts.topics);
  registerArchiveRoutes(app, opts.archives, opts.maxUploadBytes ?? DEFAULT_MAX_UPLOAD, opts.archiveLimits ?? DEFAULT_ARCHIVE_LIMITS, opts.store);
  registerRebuildRoute(app, opts.store);
  registerTokenRoute(app, opts.store, opts.issueToken);
  registerMetricsRoute(app, controllerMetrics(opts.store, opts.metrics));
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // The web dashboard: static files that call this same API (docs/dashboard.md).
  registerUi(app);
  return app;
}
