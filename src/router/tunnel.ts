// A client connection joined to an instance's connection after `101
// Switching Protocols` (a WebSocket, usually): the router no longer speaks
// HTTP on either; it moves bytes both ways, with backpressure each way, for
// as long as both stay open. When one side closes or fails, the other is
// ended, not cut, so what is still queued for it (a last close frame) goes
// out first.
import type net from 'node:net';
import { CLOSE_GOING_AWAY, closeFrame, FrameBoundary } from './ws-frames.ts';

/** Dead peers on a connection that may idle for hours are found by TCP keep-alive probes. */
const KEEPALIVE_PROBE_MS = 60_000;
/** How long the side left open may take to flush and close once the other has gone. */
const CLOSE_GRACE_MS = 5_000;

/** `unreachable` when the instance's side failed (a reset): the instance may be gone. */
export type TunnelOutcome = 'ok' | 'unreachable';

/** A function's streaming limits for its WebSockets; 0 for none. */
export interface TunnelLimits {
  /** Longest time with no bytes in either direction. */
  idleMs: number;
  /** Longest life. */
  maxMs: number;
  /** The connection speaks WebSocket: a limit sends each side a close frame (1001) before ending it. */
  websocket: boolean;
  /** Told which limit ended the tunnel, for the log. */
  onLimit(why: string): void;
}

export class Tunnel {
  readonly #client: net.Socket;
  readonly #upstream: net.Socket;
  readonly #onClosed: (tunnel: Tunnel, outcome: TunnelOutcome) => void;
  #closed = false;
  #upstreamFailed = false;
  #limited = false;
  #grace: NodeJS.Timeout | undefined = undefined;
  #idle: NodeJS.Timeout | undefined = undefined;
  #max: NodeJS.Timeout | undefined = undefined;
  /** Where each direction stands in its frames, for a WebSocket with limits. */
  #toClient: FrameBoundary | undefined = undefined;
  #toInstance: FrameBoundary | undefined = undefined;

  /**
   * Both sockets paused, with the bytes already read past each side's head;
   * `onClosed` runs once, when both sides are closed.
   */
  constructor(
    client: net.Socket,
    clientRest: Buffer,
    upstream: net.Socket,
    upstreamRest: Buffer,
    onClosed: (tunnel: Tunnel, outcome: TunnelOutcome) => void,
    limits?: TunnelLimits,
  ) {
    this.#client = client;
    this.#upstream = upstream;
    this.#onClosed = onClosed;
    client.on('close', this.#sideClosed);
    upstream.on('close', this.#sideClosed);
    // A failed socket is destroyed by Node and 'close' follows; the other side is ended then.
    client.on('error', noop);
    upstream.on('error', this.#upstreamError);
    if (client.destroyed || upstream.destroyed) {
      this.destroy();
      return;
    }
    client.setKeepAlive(true, KEEPALIVE_PROBE_MS);
    upstream.setKeepAlive(true, KEEPALIVE_PROBE_MS);
    if (limits?.websocket === true) this.#followFrames(clientRest, upstreamRest);
    if (clientRest.length > 0) upstream.write(clientRest);
    if (upstreamRest.length > 0) client.write(upstreamRest);
    client.pipe(upstream);
    upstream.pipe(client);
    if (limits !== undefined) this.#limit(limits);
  }

  /** The pipes write each chunk as its 'data' event is emitted, so these listeners see exactly what has been passed on. */
  #followFrames(clientRest: Buffer, upstreamRest: Buffer): void {
    const toClient = new FrameBoundary();
    const toInstance = new FrameBoundary();
    toInstance.feed(clientRest);
    toClient.feed(upstreamRest);
    this.#client.on('data', (chunk: Buffer) => toInstance.feed(chunk));
    this.#upstream.on('data', (chunk: Buffer) => toClient.feed(chunk));
    this.#toClient = toClient;
    this.#toInstance = toInstance;
  }

  #limit(limits: TunnelLimits): void {
    const { idleMs, maxMs } = limits;
    if (idleMs > 0) {
      this.#idle = setTimeout(() => {
        // Quiet because one side is not taking what the other sent: that is backpressure, not silence.
        if (this.#client.writableNeedDrain || this.#upstream.writableNeedDrain) this.#idle?.refresh();
        else this.#endBoth(limits, `no data either way for ${idleMs / 1000} s`, 'idle timeout');
      }, idleMs);
      this.#idle.unref();
      const active = () => this.#idle?.refresh();
      this.#client.on('data', active);
      this.#upstream.on('data', active);
    }
    if (maxMs > 0) {
      this.#max = setTimeout(() => this.#endBoth(limits, `open for its maximum duration of ${maxMs / 1000} s`, 'maximum duration'), maxMs);
      this.#max.unref();
    }
  }

  /**
   * A limit ran out: both sides are ended (what is queued still goes out), and cut if they do not close in time.
   * A WebSocket side that stands between frames gets a close frame first, so its peer sees 1001 rather than a cut;
   * one in the middle of a frame cannot take one.
   */
  #endBoth(limits: TunnelLimits, why: string, reason: string): void {
    if (this.#closed || this.#grace !== undefined) return;
    // The instance may answer the close with a reset: that says nothing of its health.
    this.#limited = true;
    limits.onLimit(why);
    const client = this.#client;
    const upstream = this.#upstream;
    client.unpipe(upstream);
    upstream.unpipe(client);
    if (this.#toClient?.between === true) client.write(closeFrame(CLOSE_GOING_AWAY, reason, false));
    if (this.#toInstance?.between === true) upstream.write(closeFrame(CLOSE_GOING_AWAY, reason, true));
    for (const s of [client, upstream]) {
      s.resume();
      s.end();
    }
    this.#grace = setTimeout(() => this.destroy(), CLOSE_GRACE_MS);
    this.#grace.unref();
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Cuts both sides now. */
  destroy(): void {
    this.#client.destroy();
    this.#upstream.destroy();
    this.#finish();
  }

  readonly #sideClosed = (): void => {
    const client = this.#client;
    const upstream = this.#upstream;
    if (client.destroyed && upstream.destroyed) {
      this.#finish();
      return;
    }
    if (this.#grace !== undefined) return;
    const open = client.destroyed ? upstream : client;
    // What it still sends has nowhere to go; read and dropped, its end is seen and it closes.
    open.resume();
    open.end();
    this.#grace = setTimeout(() => open.destroy(), CLOSE_GRACE_MS);
    this.#grace.unref();
  };

  readonly #upstreamError = (): void => {
    this.#upstreamFailed = true;
  };

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#grace);
    clearTimeout(this.#idle);
    clearTimeout(this.#max);
    this.#onClosed(this, this.#upstreamFailed && !this.#limited ? 'unreachable' : 'ok');
  }
}

function noop(): void {}

/** The open tunnels of one router. Once closed, a tunnel handed to it is cut at once: the router is stopping. */
export class Tunnels {
  readonly #open = new Set<Tunnel>();
  #closed = false;

  get size(): number {
    return this.#open.size;
  }

  add(tunnel: Tunnel): void {
    if (this.#closed) tunnel.destroy();
    else if (!tunnel.closed) this.#open.add(tunnel);
  }

  delete(tunnel: Tunnel): void {
    this.#open.delete(tunnel);
  }

  /** Cuts every tunnel, now and from now on: a tunnel has no end of its own to wait for. */
  closeAll(): void {
    this.#closed = true;
    for (const t of [...this.#open]) t.destroy();
  }
}
