// Archive upload and download: `POST /v1/archives` streams a zip (or any
// file) into the content-addressed store and answers with the URL packages
// refer to it by; `GET /v1/archives/<sha256>` streams it back. A zip is
// inspected (zip-inspect.ts) before it is kept: an unsafe one is refused
// here, naming the entry, and nothing of it is stored.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ARCHIVE_URL_PREFIX, SHA256_HEX } from '../api/build-command.ts';
import { FlintError, invalid } from '../api/errors.ts';
import { type ArchiveStore, type InspectLimits, inspectZip, isZipFile } from '../archive/index.ts';
import { ErrorBody } from './openapi.ts';

export const ARCHIVE_CONTENT_TYPES = ['application/octet-stream', 'application/zip'];

const Uploaded = Type.Object({
  url: Type.String({ description: `${ARCHIVE_URL_PREFIX}<sha256>: use it as a package archive's url` }),
  checksum: Type.Object({ type: Type.Literal('sha256'), sum: Type.String() }),
  size: Type.Integer(),
});

function checkSha(value: string, field: string): string {
  if (!SHA256_HEX.test(value)) throw invalid(field, `'${value}' is not a sha256 (64 lowercase hex digits)`);
  return value;
}

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
          description: `Send the bytes as ${ARCHIVE_CONTENT_TYPES.join(' or ')}. With ?sha256= the upload is refused (400 FLINT_ERR_BAD_ARCHIVE) unless the bytes match. A zip with an unsafe entry is refused (400 FLINT_ERR_BAD_ARCHIVE, naming the entry) and not kept. Archives no package refers to are deleted after a grace period.`,
          querystring: Type.Object({ sha256: Type.Optional(Type.String()) }),
          response: { 201: Uploaded, 400: ErrorBody, 413: ErrorBody, 415: ErrorBody },
        },
      },
      async (req, reply) => {
        const expected = req.query.sha256 === undefined ? undefined : checkSha(req.query.sha256, 'sha256');
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
          params: Type.Object({ sha256: Type.String() }),
          response: { 200: Type.String({ format: 'binary' }), 400: ErrorBody, 404: ErrorBody },
        },
      },
      async (req, reply) => {
        const sha = checkSha(req.params.sha256, 'sha256');
        const info = await store().get(sha);
        if (!info) throw new FlintError('FLINT_ERR_NOT_FOUND', `archive ${sha} not found`);
        reply.header('content-type', 'application/octet-stream').header('content-length', info.size);
        return reply.send(await store().open(sha));
      },
    );
  });
}
