// Archive upload and download: `POST /v1/archives` streams a zip (or any
// file) into the content-addressed store and answers with the URL packages
// refer to it by; `GET /v1/archives/<sha256>` streams it back. A zip is
// inspected (zip-inspect.ts) before it is kept: an unsafe one is refused
// here, naming the entry, and nothing of it is stored.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ARCHIVE_URL_PREFIX } from '../api/build-command.ts';
import { FlintError } from '../api/errors.ts';
import { ArchiveParams, UploadQuery } from '../api/params.ts';
import { type ArchiveStore, type InspectLimits, inspectZip, isZipFile } from '../archive/index.ts';
import { errorResponses } from './openapi.ts';

export const ARCHIVE_CONTENT_TYPES = ['application/octet-stream', 'application/zip'];

const Uploaded = Type.Object({
  url: Type.String({ description: `${ARCHIVE_URL_PREFIX}<sha256>: use it as a package archive's url` }),
  checksum: Type.Object({ type: Type.Literal('sha256'), sum: Type.String({ pattern: '^[0-9a-f]{64}$' }) }),
  size: Type.Integer(),
});

export function registerArchiveRoutes(app: FastifyInstance, archives: ArchiveStore | undefined, maxUploadBytes: number, limits: InspectLimits): void {
  app.register(async (sub) => {
    // The body is the archive itself, streamed to disk: never parsed, never held in memory.
    sub.addContentTypeParser(ARCHIVE_CONTENT_TYPES, (_req, payload, done) => done(null, payload));
    const store = () => {
      if (!archives) throw new FlintError('FLINT_ERR_UNAVAILABLE', 'this server keeps no archives');
      return archives;
    };

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
          info = await store().put(req.body as NodeJS.ReadableStream, { expectedSha256: expected, maxBytes: maxUploadBytes, check });
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

    sub.get<{ Params: { sha256: string } }>(
      '/v1/archives/:sha256',
      {
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
        const info = await store().get(sha);
        if (!info) throw new FlintError('FLINT_ERR_NOT_FOUND', `archive ${sha} not found`);
        reply.header('content-type', 'application/octet-stream').header('content-length', info.size);
        return reply.send(await store().open(sha));
      },
    );
  });
}
