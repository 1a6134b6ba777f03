// The fetcher: the sidecar of a kubernetes-mode pool pod (port 8000, named
// http-fetcher). The executor claims a generic pod and sends it one
// `POST /specialize`; the fetcher downloads the function's deployment
// archive into the volume it shares with the environment container,
// verifies its checksum, unpacks a zip, writes the function's Secrets and
// ConfigMaps as files, and asks the environment on localhost to load the
// code (v1 `/specialize`, v2+ `/v2/specialize`), retrying while the
// environment is still starting. A pod is specialized once.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { extractZip, isZipFile, sha256File } from '../archive/index.ts';
import { secretMatcher } from '../auth/secret-util.ts';
import { mkdirUnder } from '../fsafe/mkdir.ts';
import { openNoFollow, writeFileNoFollow } from '../fsafe/open.ts';
import { BadSpecializeRequest, type FetchRequest, type LoadRequest, parseSpecializeRequest } from './request.ts';

export interface FetcherOptions {
  host?: string;
  port: number;
  /** The volume shared with the environment container. */
  userfuncDir: string;
  secretsDir: string;
  configsDir: string;
  /** The environment container, from inside the pod. */
  envUrl: string;
  /** How long the environment may take to answer at all (it may still be starting). */
  envWaitMs?: number;
  /** Largest archive, and largest total a zip may unpack to. */
  maxBytes?: number;
  /**
   * The executor's token: a specialize request must carry it as a bearer token, so nothing else that can reach
   * the pod can load code into it. Unset: any request is taken (as Fission's fetcher takes them).
   */
  token?: string;
  log?: (line: string) => void;
}

export interface RunningFetcher {
  url: string;
  close(): Promise<void>;
}

const MAX_BODY = 768 * 1024 * 1024;

class SpecializeFailed extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function connectFailure(err: unknown): boolean {
  const code = (err as { cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code;
  return code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'UND_ERR_SOCKET';
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_BODY) throw new SpecializeFailed(413, `the request is larger than ${MAX_BODY} bytes`);
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function startFetcher(o: FetcherOptions): Promise<RunningFetcher> {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const maxBytes = o.maxBytes ?? 2 * 1024 ** 3;
  let state: 'generic' | 'specializing' | 'specialized' | 'failed' = 'generic';

  /** Downloads with retries: a mesh's sidecar may not pass traffic for the first seconds of a pod. */
  async function download(f: FetchRequest, file: string): Promise<void> {
    if (f.literal !== undefined) {
      writeFileNoFollow(file, Buffer.from(f.literal, 'base64'), 'replace', 0o600);
      return;
    }
    const url = f.url as string;
    let lastErr: unknown;
    for (let attempt = 0; attempt < 6; attempt++) {
      if (attempt > 0) await sleep(100 * 2 ** attempt);
      let res: Response;
      try {
        res = await fetch(url, { headers: f.authorization ? { authorization: f.authorization } : {} });
      } catch (err) {
        lastErr = err;
        continue;
      }
      if (res.status >= 500) {
        lastErr = new Error(`status ${res.status}`);
        await res.body?.cancel();
        continue;
      }
      if (res.status !== 200 || !res.body) throw new SpecializeFailed(502, `downloading the archive from ${url} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
      const out = fs.createWriteStream(file, { fd: openNoFollow(file, 'replace', 0o600) });
      let size = 0;
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          size += chunk.length;
          if (size > maxBytes) throw new SpecializeFailed(413, `the archive at ${url} is larger than ${maxBytes} bytes`);
          if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
        }
      } finally {
        await new Promise<void>((r) => out.end(r));
      }
      return;
    }
    throw new SpecializeFailed(502, `downloading the archive from ${url} failed: ${(lastErr as Error)?.message ?? lastErr}`);
  }

  function writeData(dir: string, data: FetchRequest['secrets'], mode: number): void {
    for (const [ref, values] of Object.entries(data ?? {})) {
      const [ns, name] = ref.split('/');
      // The pod's volumes are shared with the environment container, which runs user code: follow no link there.
      const target = mkdirUnder(dir, `${ns}/${name}`);
      for (const [key, value] of Object.entries(values)) writeFileNoFollow(path.join(target, key), value, 'replace', mode);
    }
  }

  /** Asks the environment to load the code, retrying while nothing listens yet. */
  async function load(l: LoadRequest): Promise<void> {
    const v1 = (l.envVersion ?? 2) < 2;
    const url = `${o.envUrl.replace(/\/+$/, '')}${v1 ? '/specialize' : '/v2/specialize'}`;
    const body = v1
      ? ''
      : JSON.stringify({ filepath: l.filepath, functionName: l.functionName ?? '', url: '', FunctionMetadata: l.FunctionMetadata, envVersion: l.envVersion ?? 2, env: l.env });
    const deadline = Date.now() + (o.envWaitMs ?? 7 * 60_000);
    let delay = 25;
    for (;;) {
      try {
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': v1 ? 'text/plain' : 'application/json' }, body });
        const text = await res.text();
        if (res.status >= 300) throw new SpecializeFailed(500, `the environment refused to load the function: ${res.status} ${text.slice(0, 2000)}`);
        return;
      } catch (err) {
        if (err instanceof SpecializeFailed) throw err;
        if (!connectFailure(err) || Date.now() >= deadline) throw new SpecializeFailed(502, `the environment at ${o.envUrl} did not answer: ${(err as Error).message}`);
        await sleep(delay);
        delay = Math.min(delay * 2, 500);
      }
    }
  }

  async function specialize(body: string): Promise<void> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw new SpecializeFailed(400, 'the body is not JSON');
    }
    const req = parseSpecializeRequest(parsed);
    const f = req.FetchReq;
    fs.mkdirSync(o.userfuncDir, { recursive: true });
    const tmp = path.join(o.userfuncDir, `.download-${randomBytes(6).toString('hex')}`);
    const target = path.join(o.userfuncDir, f.filename);
    try {
      await download(f, tmp);
      if (f.checksum !== undefined) {
        const sum = await sha256File(tmp);
        if (sum !== f.checksum) throw new SpecializeFailed(502, `the archive's sha256 is ${sum}, expected ${f.checksum}`);
      }
      fs.rmSync(target, { recursive: true, force: true });
      if (!f.keeparchive && (await isZipFile(tmp))) await extractZip(tmp, target, { maxBytes });
      else fs.renameSync(tmp, target);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
    writeData(o.secretsDir, f.secrets, 0o400);
    writeData(o.configsDir, f.configmaps, 0o444);
    await load(req.LoadReq);
  }

  const tokenMatches = o.token ? secretMatcher(o.token) : undefined;

  const server = http.createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    const url = req.url ?? '/';
    if (req.method === 'GET' && (url === '/healthz' || url === '/readiness-healthz')) return reply(200, { state });
    if (req.method !== 'POST' || url !== '/specialize') return reply(404, { error: `no route ${req.method} ${url}` });
    if (tokenMatches !== undefined) {
      const given = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (given === undefined || !tokenMatches(given)) {
        req.resume();
        return reply(401, { error: 'a specialize request must carry the executor\'s fetcher token (Authorization: Bearer)' });
      }
    }
    if (state !== 'generic') {
      const what = { specializing: 'being specialized', specialized: 'already specialized', failed: 'done: its specialization failed' }[state];
      return reply(409, { error: `this pod is ${what}: a pod loads one function, once` });
    }
    state = 'specializing';
    const started = Date.now();
    readBody(req)
      .then(specialize)
      .then(
        () => {
          state = 'specialized';
          log(`specialized in ${Date.now() - started} ms`);
          reply(200, {});
        },
        (err) => {
          // A request that never got as far as the pod's state can be sent again; a failed load cannot.
          state = err instanceof BadSpecializeRequest || (err instanceof SpecializeFailed && err.status === 400) ? 'generic' : 'failed';
          const status = err instanceof BadSpecializeRequest ? 400 : err instanceof SpecializeFailed ? err.status : 500;
          log(`specialize failed: ${(err as Error).message}`);
          reply(status, { error: (err as Error).message });
        },
      );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host ?? '0.0.0.0', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.address.includes(':') ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
