// Test-side HTTP: node:http so any header (Host included) can be sent, no
// connection reuse so nothing outlives a test.
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { eventually } from '../../testing/eventually.ts';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text(): string;
  json(): any;
}

export interface CallOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export function call(base: string, path: string, opts: CallOptions = {}): Promise<Reply> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path, method: opts.method ?? 'GET', headers: opts.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            text: () => body.toString(),
            json: () => JSON.parse(body.toString()),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}


/** A raw connection that asked to upgrade, once the response head is in. */
export interface UpgradeReply {
  socket: net.Socket;
  status: number;
  /** The response head, up to the empty line. */
  head: string;
  /** Bytes after the head so far. */
  readonly rest: Buffer;
  /** Waits until the bytes after the head satisfy `check`. */
  until(check: (rest: Buffer) => boolean, what: string): Promise<Buffer>;
  /** Resolves when the connection has closed. */
  closed: Promise<void>;
}

/** Sends an upgrade request (`Upgrade: websocket` unless headers say otherwise) on a fresh connection, plus `early` bytes after it. */
export async function upgradeCall(base: string, path: string, headers: Record<string, string> = {}, early?: Buffer): Promise<UpgradeReply> {
  const u = new URL(base);
  const socket = net.connect({ host: u.hostname, port: Number(u.port) });
  const all: Record<string, string> = { Host: u.host, Connection: 'Upgrade', Upgrade: 'websocket', ...headers };
  let text = `GET ${path} HTTP/1.1\r\n`;
  for (const [k, v] of Object.entries(all)) text += `${k}: ${v}\r\n`;
  socket.write(`${text}\r\n`);
  if (early !== undefined) socket.write(early);
  const closed = once(socket, 'close').then(() => {});
  socket.on('error', () => {});
  let buf = Buffer.alloc(0);
  socket.on('data', (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
  });
  const headEnd = await eventually<number | undefined>(() => {
    const i = buf.indexOf('\r\n\r\n');
    if (i !== -1) return i;
    if (socket.destroyed) throw new Error(`closed before a response head: ${JSON.stringify(buf.toString('latin1'))}`);
    return undefined;
  }, `a response head for ${path}`);
  const head = buf.subarray(0, headEnd).toString('latin1');
  const skip = headEnd + 4;
  return {
    socket,
    status: Number(head.slice(9, 12)),
    head,
    get rest() {
      return buf.subarray(skip);
    },
    until: async (check, what) => {
      await eventually(() => check(buf.subarray(skip)), what);
      return buf.subarray(skip);
    },
    closed,
  };
}
