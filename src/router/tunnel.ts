// A client connection joined to an instance's connection after `101
// Switching Protocols` (a WebSocket, usually): the router no longer speaks
// HTTP on either; it moves bytes both ways, with backpressure each way, for
// as long as both stay open. When either side closes or fails, both go.
import type net from 'node:net';

/** Dead peers on a connection that may idle for hours are found by TCP keep-alive probes. */
const KEEPALIVE_PROBE_MS = 60_000;

export class Tunnel {
  readonly #client: net.Socket;
  readonly #upstream: net.Socket;
  readonly #onClosed: (tunnel: Tunnel) => void;
  #closed = false;

  /**
   * Both sockets paused, with the bytes already read past each side's head;
   * `onClosed` runs once, when the tunnel is gone.
   */
  constructor(client: net.Socket, clientRest: Buffer, upstream: net.Socket, upstreamRest: Buffer, onClosed: (tunnel: Tunnel) => void) {
    this.#client = client;
    this.#upstream = upstream;
    this.#onClosed = onClosed;
    client.on('close', this.#close);
    upstream.on('close', this.#close);
    // Errors end in 'close'; listening here keeps them from being thrown.
    client.on('error', this.#close);
    upstream.on('error', this.#close);
    if (client.destroyed || upstream.destroyed) {
      this.#close();
      return;
    }
    client.setKeepAlive(true, KEEPALIVE_PROBE_MS);
    if (clientRest.length > 0) upstream.write(clientRest);
    if (upstreamRest.length > 0) client.write(upstreamRest);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  get closed(): boolean {
    return this.#closed;
  }

  destroy(): void {
    this.#close();
  }

  readonly #close = (): void => {
    if (this.#closed) return;
    this.#closed = true;
    this.#client.destroy();
    this.#upstream.destroy();
    this.#onClosed(this);
  };
}

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
