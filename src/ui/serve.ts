// Serves the dashboard at /ui on the control plane's port (a fastify
// plugin the controller mounts). The shell is public and holds no data:
// everything the page shows comes from the API afterwards, with the
// signed-in token on every call. Unknown files are a JSON 404, like the
// API's; every answer carries the strict headers of security-headers.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FlintError } from '../api/errors.ts';
import { type Asset, loadAssets } from './assets.ts';
import { UI_SECURITY_HEADERS } from './security-headers.ts';

export const UI_PATH = '/ui';

function notFound(reply: FastifyReply, what: string): FastifyReply {
  return reply.code(404).type('application/json').send(new FlintError('FLINT_ERR_NOT_FOUND', `no dashboard file ${what}`).toJSON());
}

function send(req: FastifyRequest, reply: FastifyReply, asset: Asset): FastifyReply {
  reply.header('content-type', asset.type).header('etag', asset.etag).header('cache-control', 'no-cache').header('vary', 'accept-encoding');
  if (req.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
  if (gzip) reply.header('content-encoding', 'gzip');
  return reply.send(gzip ? asset.gzip : asset.body);
}

export function registerUi(app: FastifyInstance, assets: Map<string, Asset> = loadAssets()): void {
  app.addHook('onRequest', async (req, reply) => {
    const p = req.url.split('?')[0];
    if (p === UI_PATH || p.startsWith(`${UI_PATH}/`)) reply.headers(UI_SECURITY_HEADERS);
  });
  const opts = { schema: { hide: true } };
  app.get(UI_PATH, opts, async (_req, reply) => reply.redirect(`${UI_PATH}/`, 308));
  app.get(`${UI_PATH}/`, opts, async (req, reply) => {
    const index = assets.get('index.html');
    return index ? send(req, reply, index) : notFound(reply, 'index.html (run npm run build:ui)');
  });
  app.get<{ Params: { '*': string } }>(`${UI_PATH}/*`, opts, async (req, reply) => {
    const name = req.params['*'];
    const asset = name === 'index.html' ? undefined : assets.get(name);
    // The asked path is not echoed: the answer says nothing an attacker wrote.
    return asset ? send(req, reply, asset) : notFound(reply, 'at this path');
  });
}
