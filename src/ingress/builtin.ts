// The builtin gateway: local mode's stand-in for an ingress controller. It
// serves only ingress-enabled routes and forwards them to the router; the
// router still does everything else (auth, method checks, the function call),
// so the gateway passes every end-to-end header, Authorization included,
// through untouched.
import type { ConnectionDrop } from '../limits/connection-admission.ts';
import { closeGroup, listenServerGroup } from '../limits/listener-group.ts';
import { limitNodeServer, type NodeServerLimits } from '../limits/node-server.ts';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Server as NetServer, Socket } from 'node:net';
import { type Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tls from 'node:tls';
import { pino, type Logger } from 'pino';
import { Pool } from 'undici';
import { type LocalIngressOptions, localOptions } from './annotations.ts';
import { compareRules, matchPath, type PathRule, parsePathRule, rewriteFor } from './paths.ts';
import { type ApplyResult, DEFAULT_BACKEND_BODY, type IngressProvider, type IngressSpec, type TlsMaterial } from './provider.ts';
import { openTunnel, type Tunnel } from './tunnel.ts';

export interface BuiltinGatewayOptions {
  /** Where the router serves routes: `http://127.0.0.1:8080`. */
  routerUrl: string;
  /** Listen address; default 127.0.0.1. */
  host?: string;
  /** HTTP port; 0 picks a free one. */
  port: number;
  /** HTTPS port (0 picks a free one); omit for no HTTPS listener. */
  httpsPort?: number;
  logger?: Logger;
  /** Most connections kept open to the router. */
  connections?: number;
  /** Sockets of each listener (HTTP, HTTPS), in one SO_REUSEPORT group (limits/listener-group.ts); 1 when absent. */
  acceptSockets?: number;
  /** Caps and timeouts of client connections, each listener (HTTP, HTTPS) on its own (install values ingress.*). */
  limits?: NodeServerLimits;
  /** Hears of connections the caps closed, by listener (`ingress`, `ingress-https`). */
  onDrop?: (listener: string) => (why: ConnectionDrop) => void;
}

export interface BuiltinGateway extends IngressProvider {
  readonly kind: 'builtin';
  /** `http://host:port`, once started. */
  readonly url: string;
  /** `https://host:port`, once started, when HTTPS is on. */
  readonly httpsUrl: string | undefined;
}

interface Entry {
  spec: IngressSpec;
  rule: PathRule;
  rewrite?: (path: string, matchedLength: number) => string;
  options: LocalIngressOptions;
}

interface HostGroup {
  exact: Map<string, Entry>;
  /** Everything that is not a plain exact path, in match order. */
  ordered: Entry[];
}

interface Table {
  hosts: Map<string, HostGroup>;
  /** `*.example.com` groups by suffix (`.example.com`), longest first. */
  wildcards: Array<[string, HostGroup]>;
  any: HostGroup;
  contexts: Map<string, tls.SecureContext>;
  wildcardContexts: Array<[string, tls.SecureContext]>;
  /** For clients that send no SNI, and hosts with no certificate of their own. */
  defaultMaterial?: TlsMaterial;
}

/** What the gateway does with a request, whether it is a plain one or an Upgrade. */
type Decision =
  | { kind: 'answer'; status: number; text: string; extra?: Record<string, string> }
  | { kind: 'forward'; entry: Entry; path: string; headers: Record<string, string | string[]> };

const BAD_GATEWAY = 'bad gateway: the router did not answer';

/** As undici's own connect timeout, which bounds the wait on the plain path. */
const ROUTER_CONNECT_TIMEOUT_MS = 10_000;

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'expect',
  'http2-settings',
]);

function emptyGroup(): HostGroup {
  return { exact: new Map(), ordered: [] };
}

function emptyTable(): Table {
  return { hosts: new Map(), wildcards: [], any: emptyGroup(), contexts: new Map(), wildcardContexts: [] };
}

/** Lower-case host without port or trailing dot; IPv6 literals keep their brackets. */
export function normalizeHost(header: string | undefined): string {
  if (!header) return '';
  let h = header.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end > 0 ? h.slice(0, end + 1) : h;
  }
  const colon = h.lastIndexOf(':');
  if (colon >= 0) h = h.slice(0, colon);
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

function safeDecode(path: string): string {
  if (!path.includes('%')) return path;
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

function lookupGroup(group: HostGroup, path: string): { entry: Entry; matchedLength: number } | undefined {
  const exact = group.exact.get(path);
  if (exact) return { entry: exact, matchedLength: path.length };
  for (const entry of group.ordered) {
    const m = matchPath(entry.rule, path);
    if (m) return { entry, matchedLength: m.matchedLength };
  }
  return undefined;
}

function lookup(table: Table, host: string, path: string): { entry: Entry; matchedLength: number } | undefined {
  // A host's own rules first, then wildcard hosts, then any-host rules, as an
  // ingress controller merges them.
  const own = table.hosts.get(host);
  if (own) {
    const hit = lookupGroup(own, path);
    if (hit) return hit;
  }
  for (const [suffix, group] of table.wildcards) {
    if (host.endsWith(suffix) && host.length > suffix.length) {
      const hit = lookupGroup(group, path);
      if (hit) return hit;
    }
  }
  return lookupGroup(table.any, path);
}

function forwardHeaders(req: http.IncomingMessage, secure: boolean): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const listed = new Set(
    String(req.headers.connection ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (HOP_BY_HOP.has(name) || listed.has(name)) continue;
    const value = raw[i + 1];
    const prev = out[name];
    if (prev === undefined) out[name] = value;
    else if (Array.isArray(prev)) prev.push(value);
    else out[name] = [prev, value];
  }
  // The gateway is the only one that knows these: never trust a client's copy.
  if (req.headers.host) out['x-forwarded-host'] = req.headers.host;
  else delete out['x-forwarded-host'];
  out['x-forwarded-proto'] = secure ? 'https' : 'http';
  const client = req.socket.remoteAddress ?? '';
  const prior = req.headers['x-forwarded-for'];
  out['x-forwarded-for'] = prior ? `${prior}, ${client}` : client;
  return out;
}

function responseHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const listed = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || HOP_BY_HOP.has(k) || listed.has(k)) continue;
    out[k] = v;
  }
  return out;
}

const DEFAULT_BACKEND: Decision = { kind: 'answer', status: 404, text: DEFAULT_BACKEND_BODY };

function plain(res: http.ServerResponse, status: number, text: string, extra: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text), ...extra });
  res.end(text);
}

/** `plain` for a connection the HTTP server has handed over (Upgrade): the response is written by hand. */
function plainRaw(socket: Duplex, status: number, text: string, extra: Record<string, string> = {}): void {
  const headers = { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), connection: 'close', ...extra };
  const lines = [`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', text];
  socket.resume();
  socket.end(lines.join('\r\n'), () => socket.destroy());
}

/** The head of an Upgrade request to the router; header values are Latin-1, as the parser read them. */
function upgradeHead(method: string, path: string, headers: Record<string, string | string[]>, upgrade: string): string {
  const lines = [`${method} ${path} HTTP/1.1`];
  for (const [name, value] of Object.entries(headers)) {
    for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
  }
  lines.push('Connection: Upgrade', `Upgrade: ${upgrade}`, '', '');
  return lines.join('\r\n');
}

/**
 * Whether an Upgrade request becomes a tunnel. An h2c offer does not: it needs
 * HTTP2-Settings, a hop-by-hop header the router never gets, and a server may
 * ignore an upgrade offer, so it is served as the HTTP/1.1 request it also is.
 */
function wantsTunnel(req: http.IncomingMessage): boolean {
  const offered = String(req.headers.upgrade ?? '')
    .split(',')
    .map((p) => p.trim().toLowerCase());
  return offered.some((p) => p !== '' && p !== 'h2c');
}

function urlOf(scheme: string, addr: AddressInfo): string {
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `${scheme}://${host}:${addr.port}`;
}

/** Listens `server` on a group of `sockets` sockets (limits/listener-group.ts); the others' connections are fed to it. */
async function listen(server: http.Server, port: number, host: string, sockets: number, more: NetServer[]): Promise<AddressInfo> {
  const group = await listenServerGroup(server, { port, host, backlog: 4096, sockets });
  more.push(...group.more);
  return group.address;
}

/** How long requests in flight may take to finish once the gateway stops. */
const STOP_GRACE_MS = 2000;

/** Stops taking connections and closes idle ones; settles once every connection, upgraded ones too, has ended. */
function stopListening(server: http.Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeIdleConnections();
  return closed;
}

export function createBuiltinGateway(opts: BuiltinGatewayOptions): BuiltinGateway {
  const logger = opts.logger ?? pino({ level: 'silent' });
  const listenHost = opts.host ?? '127.0.0.1';
  const router = new URL(opts.routerUrl);
  const routerBase = router.pathname.replace(/\/$/, '');
  let pool: Pool | undefined;
  let table = emptyTable();
  let httpServer: http.Server | undefined;
  let httpsServer: https.Server | undefined;
  /** The listeners' other sockets, whose connections they are fed. */
  const moreSockets: NetServer[] = [];
  let url = '';
  let httpsUrl: string | undefined;
  let httpsPort = 0;
  let defaultMaterial: TlsMaterial | undefined;
  /** Open Upgrade tunnels: the listeners cannot close while they last. */
  const tunnels = new Set<Tunnel>();
  /** Responses under way, so a stop can tell them to close their connections after. */
  const answering = new Set<http.ServerResponse>();
  let stopping = false;

  /** Route matching and the forwarded request, shared by plain requests and Upgrades. */
  function decide(req: http.IncomingMessage, secure: boolean): Decision {
    // One snapshot per request: a table swap never changes a request midway.
    const t = table;
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const rawPath = q < 0 ? rawUrl : rawUrl.slice(0, q);
    const query = q < 0 ? '' : rawUrl.slice(q);
    const path = safeDecode(rawPath);
    const hit = rawPath.startsWith('/') ? lookup(t, normalizeHost(req.headers.host), path) : undefined;
    if (!hit) return DEFAULT_BACKEND;
    const { entry } = hit;
    if (!secure && entry.options.sslRedirect && httpsServer) {
      const host = normalizeHost(req.headers.host) || listenHost;
      return { kind: 'answer', status: 308, text: 'redirecting to https', extra: { location: `https://${host}:${httpsPort}${rawUrl}` } };
    }
    const max = entry.options.maxBodyBytes;
    if (max !== undefined && Number(req.headers['content-length'] ?? 0) > max) {
      return { kind: 'answer', status: 413, text: 'request entity too large' };
    }
    let target = rawPath;
    if (entry.rewrite) {
      const onRaw = matchPath(entry.rule, rawPath);
      target = onRaw
        ? entry.rewrite(rawPath, onRaw.matchedLength)
        : encodeURI(entry.rewrite(path, hit.matchedLength));
    }
    return { kind: 'forward', entry, path: routerBase + target + query, headers: forwardHeaders(req, secure) };
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, secure: boolean): Promise<void> {
    const d = decide(req, secure);
    if (d.kind === 'answer') {
      req.resume();
      plain(res, d.status, d.text, d.extra);
      return;
    }
    const max = d.entry.options.maxBodyBytes;
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    const ac = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) ac.abort();
    });
    let body: Readable | null = null;
    if (hasBody) body = max === undefined ? req : Readable.from(limited(req, max, ac));
    try {
      const up = await pool!.request({
        method: req.method as any,
        path: d.path,
        headers: d.headers,
        body,
        signal: ac.signal,
        // The router enforces each function's own timeout (up to a day).
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      res.writeHead(up.statusCode, responseHeaders(up.headers));
      await pipeline(up.body, res);
    } catch (err) {
      if (ac.signal.aborted && (ac.signal.reason as Error)?.message === 'body too large') {
        plain(res, 413, 'request entity too large');
        return;
      }
      if (ac.signal.aborted || res.destroyed) return;
      logger.warn({ err, route: d.entry.spec.name }, 'forwarding to the router failed');
      plain(res, 502, BAD_GATEWAY);
    }
  }

  function handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, secure: boolean): void {
    socket.on('error', () => socket.destroy());
    if (stopping) {
      socket.destroy();
      return;
    }
    const d = decide(req, secure);
    if (d.kind === 'answer') {
      plainRaw(socket, d.status, d.text, d.extra);
      return;
    }
    // The body goes ahead of the router's answer, so the tunnel must know where it ends.
    if (req.headers['transfer-encoding'] !== undefined) {
      plainRaw(socket, 400, 'bad request: an upgrade request cannot have a chunked body');
      return;
    }
    // The head is written by hand: anything but visible ASCII would break its framing.
    if (!/^[\x21-\x7e]+$/.test(d.path)) {
      logger.warn({ route: d.entry.spec.name, path: d.path }, 'forwarding an upgrade to the router failed: the path cannot be sent');
      plainRaw(socket, 502, BAD_GATEWAY);
      return;
    }
    // undici sends the router's own host when the client sent none; so does the tunnel.
    const headers = d.headers.host === undefined ? { host: router.host, ...d.headers } : d.headers;
    const tunnel: Tunnel = openTunnel({
      client: socket as Socket,
      head,
      request: upgradeHead(req.method ?? 'GET', d.path, headers, String(req.headers.upgrade)),
      bodyLength: Number(req.headers['content-length'] ?? 0),
      router,
      connectTimeoutMs: ROUTER_CONNECT_TIMEOUT_MS,
      onUnreachable(err) {
        logger.warn({ err, route: d.entry.spec.name }, 'forwarding an upgrade to the router failed');
        plainRaw(socket, 502, BAD_GATEWAY);
      },
      onClose: () => tunnels.delete(tunnel),
    });
    tunnels.add(tunnel);
  }

  async function* limited(req: http.IncomingMessage, max: number, ac: AbortController): AsyncIterable<Buffer> {
    let seen = 0;
    for await (const chunk of req) {
      seen += chunk.length;
      if (seen > max) {
        ac.abort(new Error('body too large'));
        return;
      }
      yield chunk;
    }
  }

  function onUpgrade(secure: boolean) {
    return (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      try {
        handleUpgrade(req, socket, head, secure);
      } catch (err) {
        logger.error({ err }, 'ingress gateway upgrade failed');
        if (!socket.destroyed) plainRaw(socket, 500, 'internal gateway error');
      }
    };
  }

  function onRequest(secure: boolean) {
    return (req: http.IncomingMessage, res: http.ServerResponse) => {
      // Once the gateway stops, no connection is kept for a next request: the router behind it is draining.
      if (stopping) res.shouldKeepAlive = false;
      else {
        answering.add(res);
        res.once('close', () => answering.delete(res));
      }
      handle(req, res, secure).catch((err) => {
        logger.error({ err }, 'ingress gateway request failed');
        plain(res, 500, 'internal gateway error');
      });
    };
  }

  function build(desired: readonly IngressSpec[], result: ApplyResult): Table {
    const next = emptyTable();
    const wild = new Map<string, HostGroup>();
    const contexts = new Map<string, tls.SecureContext>();
    const wildContexts = new Map<string, tls.SecureContext>();
    const contextCache = new Map<string, tls.SecureContext | Error>();
    let firstAny: TlsMaterial | undefined;
    let firstAll: TlsMaterial | undefined;
    for (const spec of desired) {
      let rule: PathRule;
      try {
        rule = parsePathRule(spec.path, { routePrefix: spec.routePrefix });
      } catch (err) {
        result.skipped.push({ name: spec.name, reason: (err as Error).message });
        continue;
      }
      const options = localOptions(spec.annotations, spec.tls !== undefined);
      for (const p of options.problems) result.warnings.push({ name: spec.name, reason: p });
      const entry: Entry = { spec, rule, rewrite: rewriteFor(rule, spec.target), options };
      let group: HostGroup;
      if (spec.host === '') group = next.any;
      else if (spec.host.startsWith('*.')) {
        const suffix = spec.host.slice(1);
        group = wild.get(suffix) ?? emptyGroup();
        wild.set(suffix, group);
      } else {
        group = next.hosts.get(spec.host) ?? emptyGroup();
        next.hosts.set(spec.host, group);
      }
      const plainExact = rule.kind === 'exact' && !rule.template;
      if (plainExact && group.exact.has(rule.base)) {
        result.skipped.push({ name: spec.name, reason: `path '${spec.path}' on host '${spec.host || '*'}' is already served by '${group.exact.get(rule.base)!.spec.name}'` });
        continue;
      }
      if (plainExact) group.exact.set(rule.base, entry);
      else group.ordered.push(entry);

      if (spec.tls) {
        const m = spec.tls.material;
        if (!m) {
          result.warnings.push({ name: spec.name, reason: `TLS secret '${spec.tls.secretName}': ${spec.tls.problem ?? 'no certificate'}; served over HTTP only` });
          continue;
        }
        const cacheKey = m.cert + m.key;
        let ctx = contextCache.get(cacheKey);
        if (!ctx) {
          try {
            ctx = tls.createSecureContext({ cert: m.cert, key: m.key });
          } catch (err) {
            ctx = err as Error;
          }
          contextCache.set(cacheKey, ctx);
        }
        if (ctx instanceof Error) {
          result.warnings.push({ name: spec.name, reason: `TLS secret '${spec.tls.secretName}' is not a usable certificate and key: ${ctx.message}` });
          continue;
        }
        if (spec.host === '') firstAny ??= m;
        else if (spec.host.startsWith('*.')) {
          if (!wildContexts.has(spec.host.slice(1))) wildContexts.set(spec.host.slice(1), ctx);
        } else if (!contexts.has(spec.host)) contexts.set(spec.host, ctx);
        firstAll ??= m;
      }
    }
    const byOrder = (g: HostGroup) => g.ordered.sort((a, b) => compareRules(a.rule, b.rule));
    byOrder(next.any);
    for (const g of next.hosts.values()) byOrder(g);
    for (const g of wild.values()) byOrder(g);
    next.wildcards = [...wild.entries()].sort((a, b) => b[0].length - a[0].length);
    next.contexts = contexts;
    next.wildcardContexts = [...wildContexts.entries()].sort((a, b) => b[0].length - a[0].length);
    // Clients without SNI (or with an unknown name) get the any-host
    // certificate, else some certificate, rather than a failed handshake.
    next.defaultMaterial = firstAny ?? firstAll;
    return next;
  }

  function sni(servername: string, cb: (err: Error | null, ctx?: tls.SecureContext) => void): void {
    const t = table;
    const name = servername.toLowerCase();
    let ctx = t.contexts.get(name);
    if (!ctx) ctx = t.wildcardContexts.find(([suffix]) => name.endsWith(suffix) && name.length > suffix.length)?.[1];
    // undefined: the server's default context (see setSecureContext in apply).
    cb(null, ctx);
  }

  return {
    kind: 'builtin',
    get url() {
      return url;
    },
    get httpsUrl() {
      return httpsUrl;
    },

    async start() {
      stopping = false;
      pool = new Pool(router.origin, { connections: opts.connections ?? 128, keepAliveTimeout: 30_000, pipelining: 1 });
      httpServer = http.createServer({ keepAliveTimeout: 30_000, shouldUpgradeCallback: wantsTunnel }, onRequest(false));
      httpServer.on('upgrade', onUpgrade(false));
      if (opts.limits) limitNodeServer(httpServer, opts.limits, opts.onDrop?.('ingress'));
      const addr = await listen(httpServer, opts.port, listenHost, opts.acceptSockets ?? 1, moreSockets);
      url = urlOf('http', addr);
      if (opts.httpsPort !== undefined) {
        httpsServer = https.createServer({ SNICallback: sni, keepAliveTimeout: 30_000, shouldUpgradeCallback: wantsTunnel }, onRequest(true));
        httpsServer.on('upgrade', onUpgrade(true));
        if (opts.limits) limitNodeServer(httpsServer, opts.limits, opts.onDrop?.('ingress-https'));
        const saddr = await listen(httpsServer, opts.httpsPort, listenHost, opts.acceptSockets ?? 1, moreSockets);
        httpsPort = saddr.port;
        httpsUrl = urlOf('https', saddr);
      }
      logger.info({ url, httpsUrl }, 'ingress gateway listening');
    },

    async apply(desired) {
      const result: ApplyResult = { skipped: [], warnings: [] };
      const next = build(desired, result);
      const m = next.defaultMaterial;
      if (httpsServer && (m?.cert !== defaultMaterial?.cert || m?.key !== defaultMaterial?.key)) {
        // No certificate left: handshakes without a known name fail again.
        httpsServer.setSecureContext(m ? { cert: m.cert, key: m.key } : {});
        defaultMaterial = m;
      }
      table = next;
      return result;
    },

    async stop(whileTunnelsOpen) {
      stopping = true;
      for (const res of answering) if (!res.headersSent) res.shouldKeepAlive = false;
      const servers = [httpServer, httpsServer].filter((s): s is http.Server => s !== undefined);
      const closing = Promise.all([...servers.map(stopListening), closeGroup(moreSockets.splice(0))]);
      try {
        await whileTunnelsOpen?.();
      } finally {
        // A WebSocket may stay open for days; waiting for it would hang the stop.
        for (const t of tunnels) t.destroy();
        tunnels.clear();
        // Connections that finished a request since the listeners closed are idle now.
        for (const s of servers) s.closeIdleConnections();
        // Requests in flight get a moment to finish (when the router stopped behind the gateway, they already have).
        const cut = setTimeout(() => {
          for (const s of servers) s.closeAllConnections();
        }, STOP_GRACE_MS);
        await closing;
        clearTimeout(cut);
        httpServer = httpsServer = undefined;
        await pool?.close();
        pool = undefined;
      }
    },
  };
}
