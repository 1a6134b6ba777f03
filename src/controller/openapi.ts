import { type TSchema, Type } from '@sinclair/typebox';
import type { RouteOptions } from 'fastify';
import { type ErrorCode, ErrorCodes } from '../api/errors.ts';

export const OPENAPI_INFO = {
  openapi: '3.1.0',
  info: {
    title: 'Flint control-plane API',
    version: '1',
    description:
      'Resources (environments, functions, packages, triggers, secrets, configmaps), watch, archives, and function logs. ' +
      'Every error is the Error object; a method a path does not take gets 405 with Allow.',
  },
  components: {
    securitySchemes: {
      bearer: {
        type: 'http' as const,
        scheme: 'bearer',
        description: 'Only when authentication is on: the admin token (<dataDir>/private/admin-token) or a login token from the router',
      },
    },
  },
};

/** The document a server with authentication on serves: every path but the exempt ones needs the bearer token. */
export const OPENAPI_INFO_WITH_AUTH = { ...OPENAPI_INFO, security: [{ bearer: [] }] };

export const ErrorBody = Type.Object(
  {
    code: Type.Union(
      (Object.keys(ErrorCodes) as ErrorCode[]).map((c) => Type.Literal(c)),
      { description: 'Stable error code from the registry (src/api/errors.ts)' },
    ),
    message: Type.String(),
    field: Type.Optional(Type.String({ description: 'Dotted path of the offending field' })),
  },
  { $id: 'Error' },
);

/** What each error status means on this API, as the document says it. */
const ERROR_MEANINGS: Record<number, string> = {
  400: 'A parameter or the body is invalid (FLINT_ERR_VALIDATION, FLINT_ERR_BAD_JSON, FLINT_ERR_BAD_ARCHIVE); field names it',
  401: 'Authentication is on and the request has no valid admin token or control-plane token (FLINT_ERR_UNAUTHORIZED)',
  404: 'No such object (FLINT_ERR_NOT_FOUND)',
  409: 'The name is taken, metadata.resourceVersion is stale, or the object is in use (FLINT_ERR_ALREADY_EXISTS, FLINT_ERR_CONFLICT, FLINT_ERR_IN_USE)',
  410: 'The resourceVersion is older than the kept history (FLINT_ERR_GONE)',
  413: 'The body is larger than the limit (FLINT_ERR_PAYLOAD_TOO_LARGE)',
  415: 'The body is not in a content type this operation takes (FLINT_ERR_UNSUPPORTED_MEDIA_TYPE)',
  429: 'Too many failed attempts from this client: wait the Retry-After seconds (FLINT_ERR_TOO_MANY_REQUESTS)',
  503: 'What this operation needs is not configured on this server (FLINT_ERR_UNAVAILABLE)',
  501: 'Not available in this mode (FLINT_ERR_NOT_IMPLEMENTED); the message says where to look instead',
  507: 'The filesystem of the data directory is full: nothing was written (FLINT_ERR_STORAGE_FULL)',
};

/** node:http refuses a request line or head over its size limit (16 KiB) before any route sees it, with no body. */
const HEAD_LIMITS = {
  414: Type.Null({ description: 'The request target is too long (refused by the HTTP server, no body)' }),
  431: Type.Null({ description: 'The request head is too large (refused by the HTTP server, no body)' }),
};

/** The documented error responses with these statuses. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  return Object.fromEntries(statuses.map((s) => [s, Type.Ref('Error', { description: ERROR_MEANINGS[s] })]));
}

/**
 * Adds the errors every route of a kind can give, so no route forgets one:
 * 401 where a token is needed, 400 where there are parameters or a body,
 * 413 and 415 where there is a body, 507 on writes, 414 and 431 everywhere. Route-specific ones (404, 409...) the
 * route lists itself.
 */
export function addCommonErrors(route: RouteOptions, needsToken: boolean): void {
  const schema = route.schema as (Record<string, unknown> & { response?: Record<number, unknown> }) | undefined;
  if (!schema || schema.hide) return;
  const statuses: number[] = [];
  if (needsToken) statuses.push(401);
  if (schema.params || schema.querystring || schema.body) statuses.push(400);
  if (schema.body) statuses.push(413, 415);
  // Every write goes to the store, which refuses it whole when the disk is full.
  const methods = ([] as string[]).concat(route.method);
  if (methods.some((m) => m === 'POST' || m === 'PUT' || m === 'DELETE' || m === 'PATCH')) statuses.push(507);
  const response: Record<number, unknown> = { ...(schema.response ?? {}), ...HEAD_LIMITS };
  for (const [s, r] of Object.entries(errorResponses(...statuses))) response[Number(s)] ??= r;
  route.schema = { ...schema, response, ...(needsToken ? {} : { security: [] }) };
}

/** Components keep their own names (Error, Environment...) rather than def-0, def-1. */
export const refResolver = {
  buildLocalReference(json: { $id?: unknown }, _baseUri: unknown, _fragment: unknown, i: number): string {
    return typeof json.$id === 'string' ? json.$id : `def-${i}`;
  },
};

/** The committed copy of the document; a test regenerates it and fails on a diff. */
export const OPENAPI_FILE = new URL('../../docs/openapi.json', import.meta.url);

export async function renderOpenApi(app: { ready(): PromiseLike<unknown>; swagger(): unknown }): Promise<string> {
  await app.ready();
  return `${JSON.stringify(app.swagger(), null, 2)}\n`;
}
