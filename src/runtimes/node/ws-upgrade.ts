// The WebSocket opening handshake on the worker's HTTP server, then the
// connection goes to the function as Fission's Node environment hands it
// over: `fn(ws, clients)`, with the upgrade request as a third argument (a
// Flint addition: its path, query and the router's headers). ws completes
// the handshake (RFC 6455 4.2); the checks here come first because Flint's
// refusals say more than ws's: JSON naming the fault, 426 for a version
// other than 13 (ws also takes the older 8), and 503 while generic.
import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Handler } from './loader.ts';
import { acceptWebSocket, CLOSE_GOING_AWAY, createWebSocketServer, type FunctionWebSocket, functionFailed } from './websocket.ts';

/** The base64 form of 16 bytes, the only key RFC 6455 allows. */
const KEY = /^[+/0-9A-Za-z]{22}==$/;
/** An HTTP token (RFC 9110 5.6.2), which a subprotocol name must be. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** How long a refused client may take to hang up before the worker does. */
const REFUSAL_LINGER_MS = 10_000;

interface Refusal {
  status: number;
  error: string;
  headers?: string[];
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

/** A refusal, or undefined for a request ws may complete. */
function check(req: IncomingMessage): Refusal | undefined {
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
  // ws selects the first subprotocol offered.
  return undefined;
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

/** Calls the raw exported function, whatever its arity: HTTP's calling conventions do not apply. */
function run(fn: Handler, ws: FunctionWebSocket, clients: Set<FunctionWebSocket>, req: IncomingMessage): void {
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

export interface WebSocketUpgrades {
  /** The HTTP server's 'upgrade' listener. */
  onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Sends every open WebSocket a close frame (1001: the worker is going away). */
  closeAll(): void;
}

/** `handler()`: the specialized function, undefined while the worker is generic. */
export function webSocketUpgrades(opts: { handler: () => Handler | undefined; maxPayload: number; debug: boolean }): WebSocketUpgrades {
  // Made at the first upgrade: ws is loaded then (websocket.ts says why).
  let server: ReturnType<typeof createWebSocketServer> | undefined;
  const wsServer = () => {
    if (!server) {
      server = createWebSocketServer({ maxPayload: opts.maxPayload });
      // What ws refuses after the checks above let a request through (an
      // Upgrade list, a subprotocol offered twice) is refused in the same form.
      server.on('wsClientError', (err, socket) => refuse(socket, { status: 400, error: err.message }));
    }
    return server;
  };
  return {
    onUpgrade(req, socket, head) {
      // The HTTP server took its own error listener off this socket: without
      // one, a client's reset would crash the worker.
      socket.on('error', () => {});
      const fn = opts.handler();
      const refusal = fn === undefined ? GENERIC : check(req);
      if (opts.debug) process.stderr.write(`flint-runtime: ${req.method} ${req.url} (upgrade) -> ${refusal?.status ?? 101}\n`);
      if (refusal !== undefined) {
        refuse(socket, refusal);
        return;
      }
      // (fn is defined here: a generic worker was refused above.)
      if (fn === undefined || socket.destroyed) return;
      // ws has added the connection to server.clients, and its own 'close'
      // listener, which takes it out, comes before the function's: a
      // function's 'close' sees the set without this one.
      const wss = wsServer();
      acceptWebSocket(wss, req, socket, head, (ws) => run(fn, ws, wss.clients, req));
    },
    closeAll() {
      for (const ws of server?.clients ?? []) ws.close(CLOSE_GOING_AWAY, 'worker shutting down');
    },
  };
}
