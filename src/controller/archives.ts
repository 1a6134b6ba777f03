// Archive upload and download: `POST /v1/archives` streams a zip (or any
// file) into the content-addressed store and answers with the URL packages
// refer to it by; `GET /v1/archives/<sha256>` streams it back. A zip is
// inspected (zip-inspect.ts) before it is kept: an unsafe one is refused
// here, naming the entry, and nothing of it is stored. `GET /v1/archives`
// lists them with the packages that refer to each; `DELETE` refuses one a
// package still refers to. An archive is named only by its sha256, checked
// against the pattern before the store sees it, so no request names a path.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ARCHIVE_URL_PREFIX } from '../api/build-command.ts';
import { FlintError } from '../api/errors.ts';
import { ArchiveParams, UploadQuery } from '../api/params.ts';
import { type ArchiveStore, type InspectLimits, inspectZip, isZipFile } from '../archive/index.ts';
import { archiveShas } from '../archive/refs.ts';
import type { Store } from '../store/store.ts';
import { errorResponses } from './openapi.ts';

export const ARCHIVE_CONTENT_TYPES = ['application/octet-stream', 'application/zip'];

const Uploaded = Type.Object({
  url: Type.String({ description: `${ARCHIVE_URL_PREFIX}<sha256>: use it as a package archive's url` }),
  checksum: Type.Object({ type: Type.Literal('sha256'), sum: Type.String({ pattern: '^[0-9a-f]{64}$' }) }),
  size: Type.Integer(),
});

const ArchiveItem = Type.Object({
  sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
  url: Type.String({ description: `${ARCHIVE_URL_PREFIX}<sha256>` }),
  size: Type.Integer(),
  createdAt: Type.String({ format: 'date-time' }),
  packages: Type.Array(Type.String(), { description: 'The packages that refer to it, as <namespace>/<name>; empty for an orphan, which the garbage collector deletes after its grace period' }),
});

const Deleted = Type.Object({ sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }) });

/** sha256 -> the packages (`<namespace>/<name>`) that refer to it, sorted. */
async function referrers(store: Store): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const pkgs = (await store.list('Package')).items;
  pkgs.sort((a, b) => `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`));
  for (const p of pkgs) {
    const key = `${p.metadata.namespace}/${p.metadata.name}`;
    for (const sha of new Set([...archiveShas(p.spec.source), ...archiveShas(p.spec.deployment)])) out.set(sha, [...(out.get(sha) ?? []), key]);
  }
  return out;
}

export function registerArchiveRoutes(app: FastifyInstance, archives: ArchiveStore | undefined, maxUploadBytes: number, limits: InspectLimits, store: Store): void {
  app.register(async (sub) => {
    // The body is the archive itself, streamed to disk: never parsed, never held in memory.
    sub.addContentTypeParser(ARCHIVE_CONTENT_TYPES, (_req, payload, done) => done(null, payload));
    const archiveStore = () => {
      if (!archives) throw new FlintError('FLINT_ERR_UNAVAILABLE', 'this server keeps no archives');
      return archives;
    };

    sub.get(
      '/v1/archives',
      {
        schema: {
          tags: ['archives'],
          summary: 'List the stored archives',
          description: 'Every archive in the store, oldest first, with the packages that refer to it.',
          response: { 200: Type.Object({ items: Type.Array(ArchiveItem) }), ...errorResponses(503) },
        },
      },
      async () => {
        const used = await referrers(store);
        const items = [];
        for await (const info of archiveStore().list()) {
          items.push({ sha256: info.sha256, url: `${ARCHIVE_URL_PREFIX}${info.sha256}`, size: info.size, createdAt: info.createdAt.toISOString(), packages: used.get(info.sha256) ?? [] });
        }
        items.sort((a, b) => (a.createdAt === b.createdAt ? a.sha256.localeCompare(b.sha256) : a.createdAt.localeCompare(b.createdAt)));
        return { items };
      },
    );

    sub.post<{ Querystring: { sha256?: string } }>(
      '/v1/archives',
      {
        schema: {
          tags: ['archives'],
          summary: 'Upload an archive',
          description: `Send the bytes as ${ARCHIVE_CONTENT_TYPES.join(' or ')}. With ?sha256= the upload is refused (400 FLINT_ERR_BAD_ARCHIVE) unless the bytes match. A zip with an unsafe entry is refused (400 FLINT_ERR_BAD_ARCHIVE, naming the entry) and not kept. Archives no package refers to are deleted after a grace period. A full data directory refuses the upload (507 FLINT_ERR_STORAGE_FULL) and keeps nothing.`,
          querystring: UploadQuery,
          consumes: ARCHIVE_CONTENT_TYPES,
          body: Type.String({ format: 'binary', description: 'The archive bytes' }),
          response: { 201: Uploaded, ...errorResponses(503, 507) },
        },
      },
      async (req, reply) => {
        const expected = req.query.sha256;
        const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
        if (!ARCHIVE_CONTENT_TYPES.includes(type)) {
          throw new FlintError('FLINT_ERR_UNSUPPORTED_MEDIA_TYPE', `send the archive as ${ARCHIVE_CONTENT_TYPES.join(' or ')}`);
        }
        const declared = Number(req.headers['content-length']);
        if (Number.isFinite(declared) && declared > maxUploadBytes) {
          throw new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `archive of ${declared} bytes is larger than the limit of ${maxUploadBytes} bytes (archives.maxUploadMB)`);
        }
        const check = async (file: string) => {
          if (await isZipFile(file)) await inspectZip(file, limits);
        };
        let info: Awaited<ReturnType<ArchiveStore['put']>>;
        try {
          info = await archiveStore().put(req.body as NodeJS.ReadableStream, { expectedSha256: expected, maxBytes: maxUploadBytes, check });
        } catch (err) {
          // Refused before the whole body arrived (too large, no space left): what is left of it
          // would be read as the next request, so this answer ends the connection.
          if (!req.raw.complete) reply.header('connection', 'close');
          throw err;
        }
        reply.code(201);
        return { url: `${ARCHIVE_URL_PREFIX}${info.sha256}`, checksum: { type: 'sha256' as const, sum: info.sha256 }, size: info.size };
      },
    );

    sub.head<{ Params: { sha256: string } }>(
      '/v1/archives/:sha256',
      {
        schema: {
          tags: ['archives'],
          summary: 'Whether an archive is stored, and its size',
          params: ArchiveParams,
          response: { 200: Type.Null({ description: 'Stored: Content-Length is its size' }), 404: Type.Null({ description: 'Not stored (no body)' }), ...errorResponses(503) },
        },
      },
      async (req, reply) => {
        const info = await archiveStore().get(req.params.sha256);
        if (!info) return reply.code(404).send();
        return reply.header('content-type', 'application/octet-stream').header('content-length', info.size).send();
      },
    );

    sub.delete<{ Params: { sha256: string } }>(
      '/v1/archives/:sha256',
      {
        schema: {
          tags: ['archives'],
          summary: 'Delete an archive',
          description: 'Refused (409 FLINT_ERR_IN_USE, naming the packages) while a package refers to it.',
          params: ArchiveParams,
          response: { 200: Deleted, ...errorResponses(404, 409, 503) },
        },
      },
      async (req) => {
        const sha = req.params.sha256;
        if (!(await archiveStore().get(sha))) throw new FlintError('FLINT_ERR_NOT_FOUND', `archive ${sha} not found`);
        const users = (await referrers(store)).get(sha);
        if (users !== undefined) {
          throw new FlintError('FLINT_ERR_IN_USE', `archive ${sha} is used by package ${users.map((u) => `'${u}'`).join(', ')}: delete or update the package first`);
        }
        if (!(await archiveStore().delete(sha))) throw new FlintError('FLINT_ERR_NOT_FOUND', `archive ${sha} not found`);
        return { sha256: sha };
      },
    );

    sub.get<{ Params: { sha256: string } }>(
      '/v1/archives/:sha256',
      {
        // HEAD has a route of its own: the generated one would read the whole archive to throw it away.
        exposeHeadRoute: false,
        schema: {
          tags: ['archives'],
          summary: 'Download an archive',
          params: ArchiveParams,
          response: {
            200: { description: 'The archive bytes', content: { 'application/octet-stream': { schema: Type.String({ format: 'binary' }) } } },
            ...errorResponses(404, 503),
          },
        },
      },
      async (req, reply) => {
        const sha = req.params.sha256;
        const info = await archiveStore().get(sha);
        if (!info) throw new FlintError('FLINT_ERR_NOT_FOUND', `archive ${sha} not found`);
        reply.header('content-type', 'application/octet-stream').header('content-length', info.size);
        return reply.send(await archiveStore().open(sha));
      },
    );
  });
}
