// A real HTTP server on a Unix socket standing in for a function instance.
// The path picks the behaviour:
//   /slow...   never answers (timeouts)
//   /reset...  destroys the connection (worker died mid-request)
//   /pipe...   streams the request body straight back
//   /big?bytes=N  streams N bytes
//   /drip?ms=N  an event stream: one event now and one every N ms, never ending
//   /half       a Content-Length of 10, then 5 bytes and silence
//   anything else: JSON {instance, method, url, headers, bodyBytes, bodySha256}
// Upgrade requests (Connection: Upgrade):
//   .../refuse   an ordinary 403 answer, then the connection closes
//   .../refuse-open  a 403 that says nothing of the connection, which stays open and is never read again
//   .../bare     a 101 that names no protocol
//   .../slow     never answers
//   anything else: 101, then one JSON line {instance, url, headers} and every byte echoed back
import { createHash } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import type { Duplex } from 'node:stream';

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
  // node:http forgets a connection once it is upgraded; close() must not wait for these.
  const upgraded = new Set<Duplex>();
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
    if (url.startsWith('/half')) {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '10' });
      res.write('12345');
      return;
    }
    if (url.startsWith('/drip')) {
      const every = Number(new URL(url, 'http://x').searchParams.get('ms') ?? 1000);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let n = 0;
      const send = () => res.write(`data: ${n++}\n\n`);
      send();
      const timer = setInterval(send, every);
      res.on('close', () => clearInterval(timer));
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
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = req.url ?? '';
    seen.push(url);
    upgraded.add(socket);
    socket.on('close', () => upgraded.delete(socket));
    socket.on('error', () => {});
    if (url.endsWith('/slow')) return;
    if (url.endsWith('/refuse-open')) {
      socket.write('HTTP/1.1 403 Forbidden\r\nContent-Length: 4\r\n\r\nnope');
      return;
    }
    if (url.endsWith('/refuse')) {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope');
      return;
    }
    if (url.endsWith('/bare')) {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n');
      return;
    }
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${req.headers.upgrade}\r\nConnection: Upgrade\r\nX-Worker: ${name}\r\n\r\n`);
    socket.write(`${JSON.stringify({ instance: name, url, headers: req.headers })}\n`);
    if (head.length > 0) socket.write(head);
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    name,
    socketPath,
    seen,
    async close() {
      server.closeAllConnections();
      for (const s of upgraded) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
