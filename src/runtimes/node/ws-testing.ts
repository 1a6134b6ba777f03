// Test helpers for WebSockets at the byte level: frames as a client sends
// them (masked, or deliberately wrong), and a raw connection that reads the
// server's handshake answer and frames. Written from RFC 6455 independently
// of the WebSocket library the runtime uses, so a shared mistake does not
// cancel out. Not a test file itself.
import { randomBytes } from 'node:crypto';
import net from 'node:net';

const EMPTY = Buffer.alloc(0);

/** Frame opcodes (RFC 6455 5.2). */
export const OP = { CONTINUATION: 0x0, TEXT: 0x1, BINARY: 0x2, CLOSE: 0x8, PING: 0x9, PONG: 0xa } as const;

export interface ClientFrameOptions {
  fin?: boolean;
  /** The three RSV bits, 0-7. */
  rsv?: number;
  mask?: boolean;
  /** Force a length encoding: 7 (only for < 126), 16 or 64 bits. */
  lengthBits?: 7 | 16 | 64;
}

/** One frame as a client sends it: masked with a random key unless told otherwise. */
export function clientFrame(opcode: number, payload: string | Buffer = EMPTY, opts: ClientFrameOptions = {}): Buffer {
  const data = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const { fin = true, rsv = 0, mask = true } = opts;
  const bits = opts.lengthBits ?? (data.length < 126 ? 7 : data.length < 65536 ? 16 : 64);
  const parts: Buffer[] = [];
  const b0 = (fin ? 0x80 : 0) | (rsv << 4) | opcode;
  const m = mask ? 0x80 : 0;
  if (bits === 7) {
    parts.push(Buffer.from([b0, m | data.length]));
  } else if (bits === 16) {
    const h = Buffer.alloc(4);
    h[0] = b0;
    h[1] = m | 126;
    h.writeUInt16BE(data.length, 2);
    parts.push(h);
  } else {
    const h = Buffer.alloc(10);
    h[0] = b0;
    h[1] = m | 127;
    h.writeBigUInt64BE(BigInt(data.length), 2);
    parts.push(h);
  }
  if (!mask) return Buffer.concat([...parts, data]);
  const key = randomBytes(4);
  const masked = Buffer.alloc(data.length);
  for (let i = 0; i < data.length; i++) masked[i] = data[i] ^ key[i % 4];
  return Buffer.concat([...parts, key, masked]);
}

/** A header announcing `high * 2^32 + low` bytes, followed by nothing (the parser must refuse first). */
export function hugeHeader(opcode: number, high: number, low = 0): Buffer {
  const h = Buffer.alloc(14);
  h[0] = 0x80 | opcode;
  h[1] = 0x80 | 127;
  h.writeUInt32BE(high, 2);
  h.writeUInt32BE(low, 6);
  return h;
}

/** A close frame's payload: the code and the reason. */
export function closeBody(code: number, reason: string | Buffer = ''): Buffer {
  const r = typeof reason === 'string' ? Buffer.from(reason) : reason;
  const b = Buffer.alloc(2 + r.length);
  b.writeUInt16BE(code, 0);
  r.copy(b, 2);
  return b;
}

export interface ServerFrame {
  fin: boolean;
  rsv: number;
  masked: boolean;
  opcode: number;
  payload: Buffer;
}

/** Frames complete at the start of `buf`, and how many bytes they took. */
export function parseServerFrames(buf: Buffer): { frames: ServerFrame[]; used: number } {
  const frames: ServerFrame[] = [];
  let pos = 0;
  for (;;) {
    if (buf.length - pos < 2) break;
    const len7 = buf[pos + 1] & 0x7f;
    const masked = (buf[pos + 1] & 0x80) !== 0;
    let at = pos + 2;
    let length = len7;
    if (len7 === 126) {
      if (buf.length < at + 2) break;
      length = buf.readUInt16BE(at);
      at += 2;
    } else if (len7 === 127) {
      if (buf.length < at + 8) break;
      length = Number(buf.readBigUInt64BE(at));
      at += 8;
    }
    if (masked) at += 4;
    if (buf.length < at + length) break;
    frames.push({
      fin: (buf[pos] & 0x80) !== 0,
      rsv: (buf[pos] >> 4) & 7,
      masked,
      opcode: buf[pos] & 0x0f,
      payload: Buffer.from(buf.subarray(at, at + length)),
    });
    pos = at + length;
  }
  return { frames, used: pos };
}

/** The code and reason of a close frame's payload (1005 for an empty one). */
export function closeOf(frame: ServerFrame): { code: number; reason: string } {
  if (frame.payload.length < 2) return { code: 1005, reason: '' };
  return { code: frame.payload.readUInt16BE(0), reason: frame.payload.subarray(2).toString('utf8') };
}

/**
 * A client on a raw socket: with `http` set it first reads an HTTP answer
 * (status, headers, and for a refusal the body up to the end of the
 * connection), then server frames.
 */
export class RawPeer {
  readonly socket: net.Socket;
  #buf: Buffer = EMPTY;
  #expectHead: boolean;
  #head: { status: number; headers: Record<string, string> } | undefined;
  readonly #frames: ServerFrame[] = [];
  #ended = false;
  #waiters: (() => void)[] = [];

  constructor(socket: net.Socket, http: boolean) {
    this.socket = socket;
    this.#expectHead = http;
    socket.on('data', (chunk: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, chunk]);
      this.#parse();
      this.#wakeAll();
    });
    const end = () => {
      this.#ended = true;
      this.#wakeAll();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
  }

  #wakeAll(): void {
    for (const w of this.#waiters.splice(0)) w();
  }

  #change(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  get ended(): boolean {
    return this.#ended;
  }

  #parse(): void {
    if (this.#expectHead) {
      const end = this.#buf.indexOf('\r\n\r\n');
      if (end === -1) return;
      const lines = this.#buf.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      this.#head = { status: Number(lines[0].split(' ')[1]), headers };
      this.#expectHead = false;
      this.#buf = this.#buf.subarray(end + 4);
      if (this.#head.status !== 101) return;
    }
    if (this.#head !== undefined && this.#head.status !== 101) return;
    const { frames, used } = parseServerFrames(this.#buf);
    this.#frames.push(...frames);
    this.#buf = this.#buf.subarray(used);
  }

  async #until(check: () => boolean, what: string): Promise<void> {
    while (!check()) {
      if (this.#ended) throw new Error(`connection ended before ${what}`);
      await this.#change();
    }
  }

  async head(): Promise<{ status: number; headers: Record<string, string> }> {
    await this.#until(() => this.#head !== undefined, 'the HTTP answer');
    return this.#head!;
  }

  /** A refusal's body: all that came after the head until the server closed. */
  async body(): Promise<string> {
    await this.head();
    await this.closed();
    return this.#buf.toString('utf8');
  }

  async frame(): Promise<ServerFrame> {
    await this.#until(() => this.#frames.length > 0, 'a frame');
    return this.#frames.shift()!;
  }

  /** Resolves once the server has ended the connection. */
  async closed(): Promise<void> {
    while (!this.#ended) {
      await this.#change();
    }
  }

  send(bytes: Buffer): void {
    this.socket.write(bytes);
  }
}

export const UPGRADE_HEADERS: Record<string, string> = {
  host: 'worker',
  upgrade: 'websocket',
  connection: 'Upgrade',
  'sec-websocket-version': '13',
};

/**
 * Sends an upgrade request on a new connection to `target` (a Unix socket
 * path, or a TCP host and port; headers whose value is undefined are left
 * out; `after` is written in the same packet, after the request) and
 * returns the peer.
 */
export function rawUpgrade(
  target: string | { host: string; port: number },
  opts: { path?: string; method?: string; headers?: Record<string, string | undefined>; after?: Buffer } = {},
): RawPeer {
  const socket = typeof target === 'string' ? net.connect(target) : net.connect({ ...target, noDelay: true });
  const headers: Record<string, string | undefined> = {
    ...UPGRADE_HEADERS,
    'sec-websocket-key': randomBytes(16).toString('base64'),
    ...opts.headers,
  };
  const lines = [`${opts.method ?? 'GET'} ${opts.path ?? '/'} HTTP/1.1`];
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) lines.push(`${k}: ${v}`);
  socket.write(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), opts.after ?? EMPTY]));
  return new RawPeer(socket, true);
}
