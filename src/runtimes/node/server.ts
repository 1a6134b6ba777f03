// The generic Node.js worker. It starts unspecialized (GET /healthz only),
// is specialized once with POST /v2/specialize {filepath, functionName, env}
// (or v1 POST /specialize, which loads <userfunc>/user), and from then on
// sends every request to the user's handler.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { invoke } from './invoke.ts';
import { type Handler, loadHandler } from './loader.ts';

const MAX_SPECIALIZE_BODY = 1024 * 1024;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

let handler: Handler | undefined;
let specializing = false;

async function readJson(req: http.IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_SPECIALIZE_BODY) throw new Error('specialize request too large');
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : {};
}

async function specialize(req: http.IncomingMessage, res: http.ServerResponse, v2: boolean): Promise<void> {
  if (handler || specializing) {
    json(res, 400, { error: 'this worker is already specialized' });
    return;
  }
  specializing = true;
  try {
    let body: { filepath?: unknown; functionName?: unknown; env?: unknown };
    try {
      body = await readJson(req);
    } catch (err) {
      json(res, 400, { error: `bad specialize request: ${(err as Error).message}` });
      return;
    }
    const userfunc = process.env.FLINT_USERFUNC_DIR ?? '/userfunc';
    const filepath = v2 ? body.filepath : path.join(userfunc, 'user');
    if (typeof filepath !== 'string' || !filepath) {
      json(res, 400, { error: 'filepath is required' });
      return;
    }
    if (body.env && typeof body.env === 'object') {
      for (const [k, v] of Object.entries(body.env as Record<string, unknown>)) {
        if (typeof v === 'string') process.env[k] = v;
      }
    }
    try {
      handler = await loadHandler(filepath, typeof body.functionName === 'string' ? body.functionName : undefined);
    } catch (err) {
      const e = err as Error;
      console.error(`failed to load function: ${e?.stack ?? String(err)}`);
      json(res, 500, { error: `failed to load function: ${e?.name ?? 'Error'}: ${e?.message ?? String(err)}` });
      return;
    }
    json(res, 200, { specialized: true });
  } finally {
    specializing = false;
  }
}

const server = http.createServer((req, res) => {
  const url = req.url ?? '/';
  if (!handler) {
    if (url === '/healthz') return json(res, 200, { status: 'ok' });
    if (req.method === 'POST' && url === '/v2/specialize') return void specialize(req, res, true);
    if (req.method === 'POST' && url === '/specialize') return void specialize(req, res, false);
    return json(res, 503, { error: 'this worker is not specialized yet' });
  }
  // Once specialized every path is the function's, except the probe.
  if (url === '/healthz' && req.method === 'GET' && req.headers['x-flint-function-name'] === undefined) {
    return json(res, 200, { status: 'ok' });
  }
  if ((url === '/v2/specialize' || url === '/specialize') && req.method === 'POST' && req.headers['x-flint-function-name'] === undefined) {
    return json(res, 400, { error: 'this worker is already specialized' });
  }
  void invoke(handler, req, res);
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 130_000;
server.requestTimeout = 0;

process.on('uncaughtException', (err) => {
  console.error(`uncaught exception in function: ${err?.stack ?? String(err)}`);
  process.exit(1);
});
process.on('unhandledRejection', (err) => {
  console.error(`unhandled rejection in function: ${(err as Error)?.stack ?? String(err)}`);
});

const socket = arg('socket') ?? process.env.FLINT_SOCKET;
const port = arg('port');
if (socket) {
  fs.rmSync(socket, { force: true });
  server.listen(socket);
} else {
  server.listen(Number(port ?? 8888), process.env.FLINT_HOST ?? '0.0.0.0');
}
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 5000).unref();
});
