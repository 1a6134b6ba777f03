// The WebSockets a function gets are the `ws` library's own, as in Fission's
// Node environment, so functions written for it run unchanged. ws is one of
// Flint's dependencies, bound read-only into the sandbox beside the runtime
// (launch.ts says where, and why a bind). What is here is what ws leaves to
// the server that embeds it: keeping one connection's troubles (a function's
// throwing listener, an error nobody listens for, a client that does not
// read) from becoming the worker's.
//
// ws is loaded at the first upgrade, not at start: with the https, TLS and
// zlib modules it pulls in, it is about a third of a worker's start-up CPU,
// and most functions never take a WebSocket.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Server, WebSocket } from 'ws';
import { requireFromEntry } from './entry-require.ts';

type WsModule = typeof import('ws');
let wsModule: WsModule | undefined;
function ws(): WsModule {
  wsModule ??= requireFromEntry('ws') as WsModule;
  return wsModule;
}

export const CLOSE_GOING_AWAY = 1001;
export const CLOSE_INTERNAL_ERROR = 1011;

/** The function's code failed on this connection: its stack goes to the function log, the client gets 1011. */
export function functionFailed(ws: WebSocket, err: unknown): void {
  process.stderr.write(`function error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  ws.close(CLOSE_INTERNAL_ERROR, 'function error');
}

/**
 * ws's WebSocket with two differences for a function's connections. A throw
 * in one of the function's listeners would leave through the socket's data
 * callback and end the worker with every connection on it; here it ends
 * this connection with 1011. And ws emits a client's protocol error whether
 * or not anyone listens, which throws when nobody does; here that error is
 * dropped, as the client has already been sent the close code it earned.
 */
function defineFunctionWebSocket(Base: typeof WebSocket): typeof WebSocket {
  return class FunctionWebSocket extends Base {
    override emit(event: string | symbol, ...args: any[]): boolean {
      if (event === 'error' && this.listenerCount('error') === 0) return false;
      try {
        return super.emit(event, ...args);
      } catch (err) {
        functionFailed(this, err);
        return true;
      }
    }
  };
}

let functionWebSocket: typeof WebSocket | undefined;

/** A function's WebSocket: ws's, with the two differences above (it adds no members). */
export type FunctionWebSocket = WebSocket;
export type FunctionWebSocketServer = Server<typeof WebSocket>;

export interface WebSocketServerOptions {
  /** The largest message accepted, in bytes, all its fragments together; a larger one closes with 1009. */
  maxPayload: number;
  /** How long close() waits for the client's close frame before cutting the connection (ws's default: 30 s). */
  closeTimeoutMs?: number;
}

/**
 * A ws server that only completes handshakes handed to it (the worker's own
 * HTTP server does the listening) and tracks its clients: the set a
 * function gets as its second argument, as Fission passes `wss.clients`.
 * No extension is negotiated (ws's default for a server), so frames carry
 * no compression.
 */
export function createWebSocketServer(opts: WebSocketServerOptions): FunctionWebSocketServer {
  // Left out rather than undefined, which ws would take as a timeout of 0.
  const closeTimeout = opts.closeTimeoutMs === undefined ? {} : { closeTimeout: opts.closeTimeoutMs };
  // Not a literal: closeTimeout is newer than @types/ws, whose excess-property check would refuse it.
  const { WebSocket: Base, WebSocketServer } = ws();
  functionWebSocket ??= defineFunctionWebSocket(Base);
  const options = { noServer: true, WebSocket: functionWebSocket, maxPayload: opts.maxPayload, perMessageDeflate: false, ...closeTimeout };
  return new WebSocketServer(options);
}

/**
 * Completes an upgrade ws's checks accept and calls `onOpen` with the open
 * WebSocket (before any of the client's frames, those read along with the
 * request included, are read). ws answers whatever it refuses itself.
 */
export function acceptWebSocket(
  server: FunctionWebSocketServer,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  onOpen: (ws: FunctionWebSocket) => void,
): void {
  server.handleUpgrade(req, socket, head, (ws) => {
    readWhileWritesDrain(ws, socket);
    onOpen(ws);
  });
}

/**
 * ws reads on however much the function writes in answer, so a client that
 * sends (messages an echo answers) but never reads would make the worker
 * queue replies without bound. After each chunk ws has handled (this
 * listener comes after ws's own), reading pauses until the socket drains.
 * ws bounds its automatic pongs itself: past 60 unwritten it cuts the
 * connection.
 */
function readWhileWritesDrain(ws: FunctionWebSocket, socket: Duplex): void {
  socket.on('data', () => {
    if (!socket.writableNeedDrain || ws.isPaused || ws.readyState !== ws.OPEN) return;
    ws.pause();
    socket.once('drain', () => ws.resume());
  });
}
