// CRUD for every kind: `/v1/{plural}` (all namespaces) and
// `/v1/namespaces/{ns}/{plural}[/{name}[/status]]`.
import { Type } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { FlintError, invalid } from '../api/errors.ts';
import { type AnyResource, type CanaryConfig, KIND_NAMES, KINDS, type KindInfo, type Package } from '../api/kinds.ts';
import { DeleteQuery, ListQuery, ResourceVersionParam, NameParams as NAME_PARAMS, NamespaceParams as NS_PARAM } from '../api/params.ts';
import { describeSchemaError, validateResource } from '../api/validate.ts';
import type { ArchiveStore } from '../archive/index.ts';
import type { InspectLimits } from '../archive/zip-inspect.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';
import { checkCanaryConfig } from './canary.ts';
import { checkPackageArchives } from './package-archives.ts';
import { initialPackageStatus, packageStatusAfterUpdate } from './package-status.ts';
import { checkDeletable, checkReferences } from './rules.ts';

/** The metadata a status write may carry: the version it was read at. */
const StatusWriteMeta = Type.Object({ resourceVersion: Type.Optional(ResourceVersionParam('Refuse the write (409) unless the object is still at this version')) });
const checkStatusWriteMeta = TypeCompiler.Compile(StatusWriteMeta);

export const DEFAULT_ARCHIVE_LIMITS = { maxEntries: 100_000, maxBytes: 2 * 1024 ** 3 };

interface NsParams {
  namespace: string;
}
interface NameParams extends NsParams {
  name: string;
}

/** Warnings ride in a header so the body stays the plain object. */
function sendWarnings(reply: FastifyReply, warnings: string[]): void {
  if (warnings.length === 0) return;
  reply.header('x-flint-warnings', JSON.stringify(warnings).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

function initialStatus(obj: AnyResource): AnyResource {
  if (obj.kind === 'Package') (obj as Package).status = initialPackageStatus(obj as Package);
  // Only the scheduler writes a time trigger's status (its last run).
  else if (obj.kind === 'TimeTrigger') obj.status = {};
  // A trigger's status is the trigger manager's to write: a client's copy is ignored.
  else if (obj.kind === 'MessageQueueTrigger') delete obj.status;
  // The canary controller's alone: it takes each new generation up.
  else if (obj.kind === 'CanaryConfig') delete obj.status;
  return obj;
}

/** What the resource routes take from the controller's options (app.ts's ControllerOptions, which has these). */
export interface ResourceRouteOptions {
  store: Store;
  localImages: boolean;
  reservedPaths: readonly string[];
  archives?: ArchiveStore;
  archiveLimits?: InspectLimits;
}

export function registerResourceRoutes(app: FastifyInstance, opts: ResourceRouteOptions): void {
  const { store } = opts;
  const validate = (k: KindInfo, body: unknown) =>
    validateResource(k.kind, body, { localImages: opts.localImages, reservedPaths: opts.reservedPaths });

  for (const name of KIND_NAMES) {
    const k = KINDS[name];
    const tags = [k.plural];
    const List = Type.Object({ items: Type.Array(Type.Ref(k.schema)), resourceVersion: Type.String() });
    app.addSchema(k.schema);
    const base = `/v1/namespaces/:namespace/${k.plural}`;

    app.get<{ Querystring: { labelSelector?: string } }>(
      `/v1/${k.plural}`,
      { schema: { tags, summary: `List ${k.plural} in every namespace`, querystring: ListQuery, response: { 200: List } } },
      async (req) => store.list(k.kind, { labelSelector: req.query.labelSelector }),
    );

    app.get<{ Params: NsParams; Querystring: { labelSelector?: string } }>(
      base,
      { schema: { tags, summary: `List ${k.plural} in a namespace`, params: NS_PARAM, querystring: ListQuery, response: { 200: List } } },
      async (req) => store.list(k.kind, { namespace: req.params.namespace, labelSelector: req.query.labelSelector }),
    );

    app.post<{ Params: NsParams }>(
      base,
      {
        schema: {
          tags,
          operationId: `create${k.kind}`,
          summary: `Create a ${k.kind}`,
          description: 'Warnings (e.g. a trigger whose function does not exist yet) come in the x-flint-warnings header as a JSON array.',
          params: NS_PARAM,
          body: Type.Ref(k.schema),
          response: { 201: Type.Ref(k.schema), ...errorResponses(409) },
        },
        links: { 201: linksToCreated(k) },
      },
      async (req, reply) => {
        const obj = validate(k, withNamespace(req.body, req.params.namespace));
        if (obj.metadata.uid !== undefined || obj.metadata.resourceVersion !== undefined) {
          delete (obj.metadata as any).uid;
          delete (obj.metadata as any).resourceVersion;
        }
        const warnings = await checkReferences(store, obj);
        if (obj.kind === 'Package') await checkPackageArchives(obj as Package, opts.archives, opts.archiveLimits ?? DEFAULT_ARCHIVE_LIMITS);
        if (obj.kind === 'CanaryConfig') await checkCanaryConfig(store, obj as CanaryConfig);
        const created = await store.create(initialStatus(obj));
        sendWarnings(reply, warnings);
        reply.code(201);
        return created;
      },
    );

    app.get<{ Params: NameParams }>(
      `${base}/:name`,
      { schema: { tags, operationId: `read${k.kind}`, summary: `Read a ${k.kind}`, params: NAME_PARAMS, response: { 200: Type.Ref(k.schema), ...errorResponses(404) } } },
      async (req) => {
        const { namespace, name } = req.params;
        const obj = await store.get(k.kind, namespace, name);
        if (!obj) throw new FlintError('FLINT_ERR_NOT_FOUND', `${k.kind} '${name}' not found in namespace '${namespace}'`);
        return obj;
      },
    );

    app.put<{ Params: NameParams }>(
      `${base}/:name`,
      {
        schema: {
          tags,
          operationId: `replace${k.kind}`,
          summary: `Replace a ${k.kind}`,
          description: 'Send metadata.resourceVersion from a read to refuse a concurrent change (409 FLINT_ERR_CONFLICT).',
          params: NAME_PARAMS,
          body: Type.Ref(k.schema),
          response: { 200: Type.Ref(k.schema), ...errorResponses(404, 409) },
        },
      },
      async (req, reply) => {
        const { namespace, name } = req.params;
        const obj = validate(k, withNamespace(req.body, namespace));
        if (obj.metadata.name !== name) throw invalid('metadata.name', `'${obj.metadata.name}' does not match the path's name '${name}'`);
        const current = await store.get(k.kind, namespace, name);
        if (!current) throw new FlintError('FLINT_ERR_NOT_FOUND', `${k.kind} '${name}' not found in namespace '${namespace}'`);
        const warnings = await checkReferences(store, obj);
        if (k.kind === 'Package') {
          await checkPackageArchives(obj as Package, opts.archives, opts.archiveLimits ?? DEFAULT_ARCHIVE_LIMITS);
          (obj as Package).status = packageStatusAfterUpdate(current as Package, obj as Package);
        } else if (obj.kind === 'MessageQueueTrigger') {
          // The status stays the trigger manager's: the store keeps the current one.
          delete obj.status;
        }
        // The stored status (the scheduler's) stays: a client's copy may be stale.
        if (obj.kind === 'TimeTrigger') delete obj.status;
        if (obj.kind === 'CanaryConfig') {
          await checkCanaryConfig(store, obj as CanaryConfig, current as CanaryConfig);
          // The stored status stays; a new spec (generation) is a new rollout to the canary controller.
          delete obj.status;
        }
        const updated = await store.update(obj);
        sendWarnings(reply, warnings);
        return updated;
      },
    );

    const statusSchema = k.statusSchema;
    if (statusSchema !== undefined) {
      app.put<{ Params: NameParams; Body: { metadata?: { resourceVersion?: string }; status?: unknown } }>(
        `${base}/:name/status`,
        {
          schema: {
            tags,
            operationId: `replace${k.kind}Status`,
            summary: `Replace the status of a ${k.kind}`,
            params: NAME_PARAMS,
            body: Type.Object({
              metadata: Type.Optional(StatusWriteMeta),
              status: statusSchema,
            }),
            response: { 200: Type.Ref(k.schema), ...errorResponses(404, 409) },
          },
        },
        async (req) => {
          const { namespace, name } = req.params;
          const body = req.body;
          if (!body || typeof body !== 'object' || !body.status || typeof body.status !== 'object') throw invalid('status', 'required');
          if (body.metadata !== undefined) {
            const wrong = checkStatusWriteMeta.Errors(body.metadata).First();
            if (wrong) throw invalid(`metadata${wrong.path.replace(/\//g, '.')}`, describeSchemaError(wrong as any));
          }
          const candidate = { ...(await getOr404(k, namespace, name)), status: body.status } as AnyResource;
          validate(k, { ...candidate, metadata: { ...candidate.metadata } });
          return store.updateStatus({ ...candidate, metadata: { ...candidate.metadata, resourceVersion: body.metadata?.resourceVersion } } as AnyResource);
        },
      );
    }

    app.delete<{ Params: NameParams; Querystring: { force?: string; resourceVersion?: string } }>(
      `${base}/:name`,
      {
        schema: {
          tags,
          operationId: `delete${k.kind}`,
          summary: `Delete a ${k.kind}`,
          description: 'Environments and packages used by a function are kept (409 FLINT_ERR_IN_USE) unless force=true.',
          params: NAME_PARAMS,
          querystring: DeleteQuery,
          response: { 200: Type.Ref(k.schema), ...errorResponses(404, 409) },
        },
      },
      async (req) => {
        const { namespace, name } = req.params;
        const force = req.query.force;
        await getOr404(k, namespace, name);
        if (force !== 'true') await checkDeletable(store, k.kind, namespace, name);
        return store.delete(k.kind, namespace, name, { resourceVersion: req.query.resourceVersion });
      },
    );
  }

  async function getOr404(k: KindInfo, namespace: string, name: string): Promise<AnyResource> {
    const obj = await store.get(k.kind, namespace, name);
    if (!obj) throw new FlintError('FLINT_ERR_NOT_FOUND', `${k.kind} '${name}' not found in namespace '${namespace}'`);
    return obj;
  }
}

/**
 * What a client can do next with an object it created, as OpenAPI links: read,
 * replace (with the object as created) and delete it by the name and namespace
 * the 201 carries. Generated clients and fuzzers follow them.
 */
function linksToCreated(k: KindInfo): Record<string, { operationId: string; parameters: Record<string, string>; requestBody?: string }> {
  const parameters = { namespace: '$response.body#/metadata/namespace', name: '$response.body#/metadata/name' };
  const links: Record<string, { operationId: string; parameters: Record<string, string>; requestBody?: string }> = {
    read: { operationId: `read${k.kind}`, parameters },
    replace: { operationId: `replace${k.kind}`, parameters, requestBody: '$response.body' },
    delete: { operationId: `delete${k.kind}`, parameters },
  };
  if (k.kind === 'Package') links.rebuild = { operationId: 'rebuildPackage', parameters };
  return links;
}

/** The URL names the namespace; a body naming another one is a mistake. */
function withNamespace(body: unknown, namespace: string): unknown {
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw new FlintError('FLINT_ERR_VALIDATION', 'body must be a JSON object');
  }
  const b = body as { metadata?: { namespace?: unknown } };
  if (!b.metadata || typeof b.metadata !== 'object') throw invalid('metadata', 'required');
  if (b.metadata.namespace !== undefined && b.metadata.namespace !== namespace) {
    throw invalid('metadata.namespace', `'${String(b.metadata.namespace)}' does not match the path's namespace '${namespace}'`);
  }
  return { ...b, metadata: { ...b.metadata, namespace } };
}
