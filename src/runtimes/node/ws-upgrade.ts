// The WebSocket opening handshake (RFC 6455 4.2) on the worker's HTTP server,
// then the connection goes to the function as Fission's Node environment
// hands it over: `fn(ws, clients)`, with the upgrade request as a third
// argument (a Flint addition: its path, query and the router's headers).
import { createHash } from 'node:crypto';
import { type IncomingMessage, STATUS_CODES } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Handler } from './loader.ts';
import { WebSocket } from './websocket.ts';
import { CLOSE_GOING_AWAY, CLOSE_INTERNAL_ERROR } from './ws-frame.ts';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** The base64 form of 16 bytes, the only key RFC 6455 allows. */
const KEY = /^[+/0-9A-Za-z]{22}==$/;
/** An HTTP token (RFC 9110 5.6.2), which a subprotocol name must be. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** How long a refused client may take to hang up before the worker does. */
const REFUSAL_LINGER_MS = 10_000;

export interface UpgradeContext {
  /** The specialized function; undefined while the worker is generic. */
  handler: Handler | undefined;
  /** Open WebSockets, given to the function; each leaves it on close. */
  clients: Set<WebSocket>;
  maxPayload: number;
  debug: boolean;
}

interface Refusal {
  status: number;
  error: string;
  headers?: string[];
}

interface Accepted {
  key: string;
  protocol: string;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** The server's shouldUpgradeCallback: other offers (h2c) are served as the plain requests they also are. */
export function offersWebSocket(req: IncomingMessage): boolean {
  const upgrade = header(req, 'upgrade') ?? '';
  return upgrade.split(',').some((p) => p.trim().toLowerCase() === 'websocket');
}

function check(req: IncomingMessage): Refusal | Accepted {
  if (req.method !== 'GET') return { status: 400, error: `a WebSocket upgrade must be a GET request, not ${req.method}` };
  if (!offersWebSocket(req)) {
    return { status: 400, error: `unsupported Upgrade protocol '${header(req, 'upgrade') ?? ''}': only websocket is` };
  }
  const version = header(req, 'sec-websocket-version');
  if (version === undefined) return { status: 400, error: 'missing Sec-WebSocket-Version header' };
  if (version.trim() !== '13') {
    return { status: 426, error: `unsupported Sec-WebSocket-Version '${version}': only 13 is`, headers: ['Sec-WebSocket-Version: 13'] };
  }
  const key = header(req, 'sec-websocket-key')?.trim();
  if (key === undefined) return { status: 400, error: 'missing Sec-WebSocket-Key header' };
  if (!KEY.test(key)) return { status: 400, error: 'invalid Sec-WebSocket-Key: it must be 16 bytes, base64-encoded' };
  const offered = header(req, 'sec-websocket-protocol');
  const protocols = offered === undefined ? [] : offered.split(',').map((p) => p.trim()).filter((p) => p !== '');
  if (!protocols.every((p) => TOKEN.test(p))) return { status: 400, error: `invalid Sec-WebSocket-Protocol '${offered}'` };
  // The first one offered, as `ws` selects by default.
  return { key, protocol: protocols[0] ?? '' };
}

/** An HTTP answer on the raw socket, then the connection is done. */
function refuse(socket: Duplex, { status, error, headers = [] }: Refusal): void {
  const body = JSON.stringify({ error });
  const head = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    'Connection: close',
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...headers,
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  // Read and drop what the client still sends until it hangs up: closing
  // with unread input would reset the connection and could lose the answer.
  socket.resume();
  setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS).unref();
}

function functionFailed(ws: WebSocket, err: unknown): void {
  process.stderr.write(`function error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  ws.close(CLOSE_INTERNAL_ERROR, 'function error');
}

/** Calls the raw exported function, whatever its arity: HTTP's calling conventions do not apply. */
function run(fn: Handler, ws: WebSocket, clients: Set<WebSocket>, req: IncomingMessage): void {
  let result: unknown;
  try {
    result = fn(ws, clients, req);
  } catch (err) {
    functionFailed(ws, err);
    return;
  }
  const thenable = result as PromiseLike<unknown> | null | undefined;
  if (thenable !== null && typeof thenable === 'object' && typeof thenable.then === 'function') {
    thenable.then(undefined, (err: unknown) => functionFailed(ws, err));
  }
}

const GENERIC: Refusal = { status: 503, error: 'Generic container: no requests supported until specialized' };

/** The HTTP server's 'upgrade' listener. */
export function handleUpgrade(ctx: UpgradeContext, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  // The HTTP server took its own error listener off this socket: without
  // one, a client's reset would crash the worker.
  socket.on('error', () => {});
  const fn = ctx.handler;
  const outcome = fn === undefined ? GENERIC : check(req);
  if (ctx.debug) {
    process.stderr.write(`flint-runtime: ${req.method} ${req.url} (upgrade) -> ${'status' in outcome ? outcome.status : 101}\n`);
  }
  if ('status' in outcome) {
    refuse(socket, outcome);
    return;
  }
  // (fn is defined here: a generic worker refused above.)
  if (fn === undefined || socket.destroyed) return;
  if (socket instanceof net.Socket) {
    socket.setNoDelay(true);
    socket.setTimeout(0);
  }
  const accept = createHash('sha1').update(outcome.key + ACCEPT_GUID).digest('base64');
  const lines = ['HTTP/1.1 101 Switching Protocols', 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Accept: ${accept}`];
  if (outcome.protocol !== '') lines.push(`Sec-WebSocket-Protocol: ${outcome.protocol}`);
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  // A throw in one of the function's listeners ends this connection, not the worker and every request on it.
  const ws: WebSocket = new WebSocket(socket, head, { protocol: outcome.protocol, maxPayload: ctx.maxPayload, onListenerError: (err) => functionFailed(ws, err) });
  const { clients } = ctx;
  clients.add(ws);
  // Registered before the function's own listeners, so its 'close' sees the set without this one.
  ws.once('close', () => clients.delete(ws));
  run(fn, ws, clients, req);
}

/** Sends every open WebSocket a close frame (1001: the worker is going away). */
export function closeAll(clients: Set<WebSocket>): void {
  for (const ws of clients) ws.close(CLOSE_GOING_AWAY, 'worker shutting down');
}
