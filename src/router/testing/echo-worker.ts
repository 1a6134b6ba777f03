// A real HTTP server on a Unix socket standing in for a function instance.
// The path picks the behaviour:
//   /slow...   never answers (timeouts)
//   /reset...  destroys the connection (worker died mid-request)
//   /pipe...   streams the request body straight back
//   /big?bytes=N  streams N bytes
//   anything else: JSON {instance, method, url, headers, bodyBytes, bodySha256}
import { createHash } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';

export interface EchoWorker {
  readonly name: string;
  readonly socketPath: string;
  /** Requests seen, by URL. */
  readonly seen: string[];
  close(): Promise<void>;
}

export interface Echo {
  instance: string;
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  bodyBytes: number;
  bodySha256: string;
}

const CHUNK = Buffer.alloc(64 * 1024, 'flint-');

export async function startEchoWorker(dir: string, name: string): Promise<EchoWorker> {
  const socketPath = path.join(dir, `${name}.sock`);
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    const url = req.url ?? '';
    seen.push(url);
    if (url.startsWith('/slow')) return;
    if (url.startsWith('/reset')) {
      req.socket.destroy();
      return;
    }
    if (url.startsWith('/pipe')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.pipe(res);
      return;
    }
    if (url.startsWith('/big')) {
      let left = Number(new URL(url, 'http://x').searchParams.get('bytes') ?? 0);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-worker-hop': 'kept', connection: 'x-worker-hop' });
      const pump = () => {
        while (left > 0) {
          const n = Math.min(left, CHUNK.length);
          left -= n;
          if (!res.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
      return;
    }
    const hash = createHash('sha256');
    let bodyBytes = 0;
    req.on('data', (c: Buffer) => {
      bodyBytes += c.length;
      hash.update(c);
    });
    req.on('end', () => {
      const echo: Echo = { instance: name, method: req.method ?? '', url, headers: req.headers, bodyBytes, bodySha256: hash.digest('hex') };
      const body = JSON.stringify(echo);
      res.writeHead(200, {
        'content-type': 'application/json',
        'x-flint-request-id': 'forged-by-function',
        'set-cookie': ['a=1', 'b=2'],
      });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    name,
    socketPath,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
