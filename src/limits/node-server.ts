// The connection caps and timeouts for a node:http(s) server (control plane,
// ingress gateway); the router's own server applies the same admission
// itself. node's `maxConnections` would refuse at the cap outright; this
// admission instead makes room by closing the oldest idle connection, as the
// router does, and counts every connection it closes. Each connection and
// request is noted as work of the event loop's turn (loop-turn.ts), which
// ends a turn that runs long under load.
import type http from 'node:http';
import type net from 'node:net';
import { ConnectionAdmission, type ConnectionDrop, type ConnectionLimits, type LimitedConnection } from './connection-admission.ts';
import { noteLoopWork } from './loop-turn.ts';

export interface NodeServerLimits extends ConnectionLimits {
  /** The longest a request head may take to arrive. */
  headersTimeoutMs: number;
  /** Idle time after which a keep-alive connection is closed. */
  keepAliveTimeoutMs: number;
}

class TrackedSocket implements LimitedConnection {
  readonly socket: net.Socket;
  readonly clientAddress: string;
  readonly key: string;
  /** Requests under way on it (node:http serves one at a time; pipelined ones queue). */
  inFlight = 0;

  constructor(socket: net.Socket, key: string) {
    this.socket = socket;
    this.clientAddress = socket.remoteAddress ?? '';
    this.key = key;
  }

  get answering(): boolean {
    return this.inFlight > 0;
  }
}

/** Applies `limits` to `server`; `onDrop` hears of each connection the caps closed. */
export function limitNodeServer(server: http.Server, limits: NodeServerLimits, onDrop: (why: ConnectionDrop) => void = () => {}): void {
  const admission = new ConnectionAdmission<TrackedSocket>(limits, onDrop);
  const open = new Set<TrackedSocket>();
  // By address and port: a TLS server's requests carry the TLS socket, not the one 'connection' saw.
  const byPeer = new Map<string, TrackedSocket>();
  const peer = (s: net.Socket) => `${s.remoteAddress}|${s.remotePort}`;
  const forget = (t: TrackedSocket) => {
    if (!open.delete(t)) return;
    admission.closed(t);
    if (byPeer.get(t.key) === t) byPeer.delete(t.key);
  };
  server.headersTimeout = limits.headersTimeoutMs;
  // requestTimeout bounds the whole request, body included; uploads may be long, so only the head is bounded here.
  server.requestTimeout = 0;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  // TLS servers hand over the socket after the handshake; 'connection' sees it before, which is what is to be capped.
  server.on('connection', (socket: net.Socket) => {
    noteLoopWork();
    if (!admission.admit(socket.remoteAddress ?? '', open, (victim) => {
      victim.socket.destroy();
      forget(victim);
    })) {
      socket.destroy();
      return;
    }
    const t = new TrackedSocket(socket, peer(socket));
    open.add(t);
    byPeer.set(t.key, t);
    admission.opened(t);
    socket.once('close', () => forget(t));
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    noteLoopWork();
    const t = byPeer.get(peer(req.socket));
    if (t === undefined) return;
    t.inFlight++;
    res.once('close', () => t.inFlight--);
  });
}
