// The byte tunnel behind an HTTP Upgrade (WebSocket) through the builtin
// gateway. The gateway has already matched the route and built the request
// head; the tunnel carries it to the router and relays bytes both ways. The
// router's answer reaches the client byte for byte, whatever it is.
//
// Client bytes beyond the request (and its Content-Length body) wait until the
// router has switched protocols: after any other answer the router may keep
// the connection for further requests, and a client could otherwise send
// those straight to the router, past the gateway's route matching.
import net from 'node:net';
import tls from 'node:tls';

export interface TunnelOptions {
  /** The client's connection, as the `upgrade` event hands it over. */
  client: net.Socket;
  /** Bytes the client sent after the request head. */
  head: Buffer;
  /** The request head for the router, up to and including the empty line. */
  request: string;
  /** Content-Length of the request body, which goes before the router answers. */
  bodyLength: number;
  router: URL;
  connectTimeoutMs: number;
  /** The router could not be reached or closed before answering; the client is still open. */
  onUnreachable(err: Error): void;
  onClose(): void;
}

export interface Tunnel {
  destroy(): void;
}

type Verdict = 'switched' | 'refused';

/** Longest answer head the tunnel reads to find the status before giving up on a 101. */
const MAX_HEAD = 64 * 1024;

/** An idle tunnel has no timeout, so keep-alive probes are what notices a peer that vanished. */
const KEEPALIVE_PROBE_MS = 60_000;

function connectTo(router: URL): net.Socket {
  const host = router.hostname.replace(/^\[|\]$/g, '');
  const secure = router.protocol === 'https:';
  const port = Number(router.port || (secure ? 443 : 80));
  return secure ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host }) : net.connect({ host, port });
}

/** Watches the router's answer until its final status line says whether it switched protocols. */
function verdictReader(): (chunk: Buffer) => Verdict | undefined {
  let buf = Buffer.alloc(0);
  return (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return buf.length > MAX_HEAD ? 'refused' : undefined;
      const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(buf.toString('latin1', 0, Math.min(end, 32)))?.[1]);
      if (status === 101) return 'switched';
      // Other 1xx answers (103 Early Hints) come before the real one.
      if (status >= 100 && status < 200) {
        buf = buf.subarray(end + 4);
        continue;
      }
      return 'refused';
    }
  };
}

/** Writes with backpressure: the source waits while the destination's buffer is full. */
function relay(from: net.Socket, to: net.Socket, chunk: Buffer): void {
  if (to.write(chunk) || from.isPaused()) return;
  from.pause();
  to.once('drain', () => from.resume());
}

export function openTunnel(o: TunnelOptions): Tunnel {
  const { client } = o;
  const upstream = connectTo(o.router);
  const readVerdict = verdictReader();
  let verdict: Verdict | undefined;
  let answered = false;
  let bodyLeft = o.bodyLength;
  let held: Buffer[] = [];
  let clientEnded = false;
  let failed = false;

  const connectEvent = o.router.protocol === 'https:' ? 'secureConnect' : 'connect';
  upstream.setTimeout(o.connectTimeoutMs, () => upstream.destroy(new Error(`the router did not accept a connection within ${o.connectTimeoutMs} ms`)));
  upstream.once(connectEvent, () => {
    upstream.setTimeout(0);
    upstream.setKeepAlive(true, KEEPALIVE_PROBE_MS);
  });
  client.setKeepAlive(true, KEEPALIVE_PROBE_MS);
  // Written before the connection is up: the socket queues it.
  upstream.write(o.request, 'latin1');

  function fromClient(chunk: Buffer): void {
    if (failed) return;
    if (bodyLeft > 0) {
      const part = chunk.subarray(0, bodyLeft);
      bodyLeft -= part.length;
      relay(client, upstream, part);
      chunk = chunk.subarray(part.length);
      if (chunk.length === 0) return;
    }
    if (verdict === 'switched') relay(client, upstream, chunk);
    else if (verdict === 'refused') upstream.end();
    else {
      held.push(chunk);
      client.pause();
    }
  }

  function decided(v: Verdict): void {
    verdict = v;
    // After a refusal the client's further bytes are a next request, which
    // must not reach the router this way: ending our side lets the router
    // finish its answer and close, and the client retries on a new connection.
    if (v === 'refused' && held.length > 0) upstream.end();
    if (v === 'switched') for (const chunk of held) relay(client, upstream, chunk);
    held = [];
    if (clientEnded) upstream.end();
    client.resume();
  }

  function fromRouter(chunk: Buffer): void {
    answered = true;
    if (verdict === undefined) {
      const v = readVerdict(chunk);
      if (v) decided(v);
    }
    relay(upstream, client, chunk);
  }

  function unreachable(err: Error): void {
    if (failed || client.destroyed) return;
    failed = answered = true;
    upstream.destroy();
    o.onUnreachable(err);
  }

  let reported = false;
  function reportClose(): void {
    if (reported) return;
    reported = true;
    o.onClose();
  }
  function closeBoth(): void {
    client.destroy();
    upstream.destroy();
    reportClose();
  }

  client.on('data', fromClient);
  client.on('end', () => {
    clientEnded = true;
    if (verdict !== undefined || bodyLeft > 0) upstream.end();
  });
  client.on('error', closeBoth);
  client.on('close', () => {
    upstream.destroy();
    reportClose();
  });
  upstream.on('data', fromRouter);
  upstream.on('error', (err) => {
    if (!answered) unreachable(err);
    else if (!failed) closeBoth();
  });
  upstream.on('close', (hadError) => {
    if (!answered) unreachable(new Error('the router closed the connection without answering'));
    else if (failed) return;
    else if (hadError) closeBoth();
    // Let the client read what is still queued for it, then close.
    else if (!client.destroyed) client.end(() => client.destroy());
  });
  if (o.head.length > 0) fromClient(o.head);

  return { destroy: closeBoth };
}
