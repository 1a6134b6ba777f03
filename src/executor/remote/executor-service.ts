// The executor as a service (kubernetes mode, role executor): every executor
// replica listens, the leader answers. Routers lease instances from it
// (protocol.ts); each grant is one of the core's leases, held for the router
// until it gives it back. A router's grants are given back for it when its
// event stream has been gone for SESSION_GRACE_MS (the router died), and
// revoked through the stream when their instance drains, so old code does
// not live on in a router's cache.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Logger } from 'pino';
import { FlintError, isFlintError } from '../../api/errors.ts';
import type { InstancesReport } from '../../api/instances.ts';
import type { FunctionResource } from '../../api/kinds.ts';
import { DNS1123_LABEL } from '../../api/names.ts';
import { secretMatcher } from '../../auth/secret-util.ts';
import type { FileRange } from '../../fsafe/open.ts';
import type { Lease } from '../types.ts';
import { type AcquireRequest, type ExecutorEvent, type GrantAnswer, type GrantOpsRequest, HEARTBEAT_MS, LOG_HEADERS, PATHS, type ReattachRequest } from './protocol.ts';

/** What the service needs of the executor it serves. */
export interface GrantingExecutor {
  acquire(fn: FunctionResource, signal?: AbortSignal): Promise<Lease>;
  /** A lease on that very instance, if it serves the current version and has room (a router's grant from an earlier leader). */
  leaseInstance(fn: FunctionResource, instanceId: string): Lease | undefined;
  instances(namespace: string, name: string): InstancesReport;
}

/** How long a router's grants outlive its event stream: a reconnect (a blip, a new leader) keeps them. */
export const SESSION_GRACE_MS = 15_000;
const SWEEP_MS = 250;
/** How long a release of a grant id not (yet) granted is remembered, and how many per router at most. */
const GIVEN_UP_MS = 60_000;
const MAX_GIVEN_UP = 10_000;
/** What the service serves besides `GET /v1/executor/{instances,logs}/<namespace>/<name>`, and with which method. */
const ROUTES = new Map<string, 'GET' | 'POST'>([
  [PATHS.acquire, 'POST'],
  [PATHS.grants, 'POST'],
  [PATHS.reattach, 'POST'],
  [PATHS.events, 'GET'],
]);
const MAX_BODY = 1 << 20;
const NAME = new RegExp(DNS1123_LABEL);

interface Grant {
  readonly id: string;
  readonly lease: Lease;
  /** What the router was told: told again when it asks for the same id (a retry whose first answer it lost). */
  readonly answer: GrantAnswer;
  revoked: boolean;
}

interface Session {
  readonly id: string;
  /** This session of the router's, among those it had here (one ends when the router is gone past the grace). */
  readonly epoch: string;
  readonly grants: Map<string, Grant>;
  /** Ids released before they were granted (the router gave up on its request), and when: a late grant is given back. */
  readonly givenUp: Map<string, number>;
  stream?: http.ServerResponse;
  /** When its stream went (epoch ms); undefined while connected. */
  goneSince?: number;
}

export interface ExecutorServiceOptions {
  host: string;
  port: number;
  /** The executor while this process leads; undefined on a standby. */
  leader(): GrantingExecutor | undefined;
  /** This process's identity in the leader election. */
  identity: string;
  /** The routers' bearer token (the Secret `executor`). */
  token: string;
  logger: Logger;
  /** SESSION_GRACE_MS unless set (tests). */
  sessionGraceMs?: number;
  /** A function's log as this process wrote it (from byte `from`, or its tail): served to the controller. */
  functionLogs?: (namespace: string, name: string, from: number | undefined) => Promise<FileRange>;
}

export class ExecutorService {
  readonly #o: ExecutorServiceOptions;
  readonly #server: http.Server;
  readonly #sessions = new Map<string, Session>();
  readonly #authorized: (given: string) => boolean;
  #sweep: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(o: ExecutorServiceOptions) {
    this.#o = o;
    this.#authorized = secretMatcher(o.token);
    this.#server = http.createServer((req, res) => {
      this.#handle(req, res).catch((err) => this.#fail(res, err));
    });
    this.#server.headersTimeout = 10_000;
    this.#server.requestTimeout = 0;
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#o.port, this.#o.host, () => resolve());
    });
    this.#sweep = setInterval(() => this.#sweepGrants(), SWEEP_MS);
    this.#sweep.unref();
    this.#heartbeat = setInterval(() => this.#broadcast({ heartbeat: Date.now() }), HEARTBEAT_MS);
    this.#heartbeat.unref();
    const a = this.#server.address() as { address: string; port: number };
    return `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
  }

  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  /** Leadership ended (or the process stops): every grant is given back and every router told to find the new leader. */
  endTerm(): void {
    for (const s of this.#sessions.values()) {
      for (const g of s.grants.values()) g.lease.release('ok');
      s.stream?.end();
    }
    this.#sessions.clear();
  }

  async stop(): Promise<void> {
    clearInterval(this.#sweep);
    clearInterval(this.#heartbeat);
    this.endTerm();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://executor');
    if (url.pathname === PATHS.health) {
      // Every replica is healthy; only the leader serves.
      return this.#json(res, 200, { identity: this.#o.identity, leader: this.#o.leader() !== undefined });
    }
    const auth = req.headers.authorization ?? '';
    if (!auth.startsWith('Bearer ') || !this.#authorized(auth.slice(7))) {
      throw new FlintError('FLINT_ERR_UNAUTHORIZED', 'the executor service takes only the routers\' token (the Secret executor)');
    }
    // The path and the method first: a request that names nothing served is answered so before any body is read.
    const perFunction = [PATHS.instances, PATHS.logs].find((p) => url.pathname.startsWith(`${p}/`));
    const method = perFunction ? 'GET' : ROUTES.get(url.pathname);
    if (!method) throw new FlintError('FLINT_ERR_NOT_FOUND', `${url.pathname} not found`);
    if (req.method !== method) throw new FlintError('FLINT_ERR_METHOD_NOT_ALLOWED', `${req.method} ${url.pathname} is not served: ${method} only`);
    const executor = this.#o.leader();
    if (!executor) throw new FlintError('FLINT_ERR_UNAVAILABLE', `executor ${this.#o.identity} is a standby, not the leader`, { retryAfterSeconds: 1 });
    if (url.pathname === PATHS.events) return this.#events(req, res, url.searchParams.get('router') ?? '');
    if (perFunction) {
      const [ns, name, ...rest] = url.pathname.slice(perFunction.length + 1).split('/').map(decodeURIComponent);
      // Names as the API takes them: a log's path is made of them.
      if (!ns || !name || rest.length > 0 || !NAME.test(ns) || !NAME.test(name)) {
        throw new FlintError('FLINT_ERR_VALIDATION', `expected ${perFunction}/<namespace>/<name>, each a DNS-1123 label`);
      }
      if (perFunction === PATHS.instances) return this.#json(res, 200, executor.instances(ns, name));
      return await this.#log(res, ns, name, url.searchParams.get('from'));
    }
    const body = await readJson(req);
    if (url.pathname === PATHS.acquire) return this.#acquire(executor, res, body as AcquireRequest);
    if (url.pathname === PATHS.grants) return this.#ops(res, body as GrantOpsRequest);
    return this.#reattach(executor, res, body as ReattachRequest);
  }

  async #log(res: http.ServerResponse, ns: string, name: string, fromText: string | null): Promise<void> {
    const from = fromText === null ? undefined : Number(fromText);
    if (from !== undefined && (fromText === '' || !Number.isSafeInteger(from) || from < 0)) {
      throw new FlintError('FLINT_ERR_VALIDATION', `from must be a byte offset (a whole number, 0 or more), got '${fromText}'`);
    }
    const read = this.#o.functionLogs;
    if (!read) throw new FlintError('FLINT_ERR_NOT_FOUND', 'this executor keeps no function logs');
    const r = await read(ns, name, from);
    res.writeHead(200, {
      'content-type': 'text/plain; charset=utf-8',
      [LOG_HEADERS.start]: String(r.start),
      [LOG_HEADERS.next]: String(r.next),
      [LOG_HEADERS.size]: String(r.size),
      // Another leader's file is another file, whatever its inode.
      [LOG_HEADERS.file]: encodeURIComponent(`${this.#o.identity}/${r.file}`),
    });
    res.end(r.text);
  }

  async #acquire(executor: GrantingExecutor, res: http.ServerResponse, body: AcquireRequest): Promise<void> {
    const router = routerOf(body);
    const fn = functionOf(body.fn, 'fn');
    const id = grantIdOf(body.grant);
    const asked = this.#session(router);
    const held = asked.grants.get(id);
    // Asked again: the client retried a request whose answer it lost. The same grant, unless revoked meanwhile.
    if (held && !held.revoked) return this.#json(res, 200, held.answer);
    if (held) {
      asked.grants.delete(id);
      held.lease.release('ok');
    }
    // The router gave up (its client went away): so does the wait here.
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const lease = await executor.acquire(fn, abort.signal);
    // The session as it is now: it may have ended (the router was gone for the grace, or the term ended) while this waited.
    const session = this.#session(router);
    if (abort.signal.aborted || session.givenUp.delete(id) || session.grants.has(id) || this.#o.leader() !== executor) {
      lease.release('ok');
      if (abort.signal.aborted) return;
      if (this.#o.leader() !== executor) throw new FlintError('FLINT_ERR_UNAVAILABLE', `executor ${this.#o.identity} is a standby, not the leader`, { retryAfterSeconds: 1 });
      throw new FlintError('FLINT_ERR_CONFLICT', `grant ${id} was given back, or taken, while it was being acquired`, { field: 'grant' });
    }
    this.#json(res, 200, this.#grant(session, lease, id));
  }

  #ops(res: http.ServerResponse, body: GrantOpsRequest): void {
    const session = this.#sessions.get(routerOf(body));
    if (!Array.isArray(body.ops)) throw new FlintError('FLINT_ERR_VALIDATION', 'ops: expected a list');
    for (const op of body.ops) {
      // Grants of an earlier leader, or already given back: nothing to do.
      const g = session?.grants.get(String(op?.grant));
      if (!g) {
        // Perhaps not granted yet: an acquire the router gave up on, still waiting here.
        if (session && op?.op === 'release' && typeof op.grant === 'string') this.#giveUp(session, op.grant);
        continue;
      }
      if (op.op === 'longLived') g.lease.markLongLived?.();
      else if (op.op === 'release') {
        session?.grants.delete(g.id);
        g.lease.release(op.outcome === 'unreachable' || op.outcome === 'timeout' ? op.outcome : 'ok');
      }
    }
    res.writeHead(204).end();
  }

  #reattach(executor: GrantingExecutor, res: http.ServerResponse, body: ReattachRequest): void {
    const session = this.#session(routerOf(body));
    if (!Array.isArray(body.grants)) throw new FlintError('FLINT_ERR_VALIDATION', 'grants: expected a list');
    // Every entry checked before any is leased: a refused request leaves nothing held for a router that never learns of it.
    const asked = body.grants.map((g, i) => ({ fn: functionOf(g?.fn, `grants[${i}].fn`), instanceId: g.instanceId }));
    const grants = asked.map(({ fn, instanceId }) => {
      const lease = typeof instanceId === 'string' ? executor.leaseInstance(fn, instanceId) : undefined;
      return lease ? this.#grant(session, lease) : null;
    });
    this.#json(res, 200, { leader: this.#o.identity, session: session.epoch, grants });
  }

  #events(req: http.IncomingMessage, res: http.ServerResponse, router: string): void {
    if (!router) throw new FlintError('FLINT_ERR_VALIDATION', 'router: the query parameter naming the router is required');
    const session = this.#session(router);
    session.stream?.end();
    session.stream = res;
    session.goneSince = undefined;
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
    res.flushHeaders();
    this.#send(session, { leader: this.#o.identity, session: session.epoch });
    // Grants revoked while it was away.
    const revoked = [...session.grants.values()].filter((g) => g.revoked).map((g) => g.id);
    if (revoked.length > 0) this.#send(session, { revoke: revoked });
    req.socket.setKeepAlive(true, HEARTBEAT_MS);
    res.on('close', () => {
      if (session.stream !== res) return;
      session.stream = undefined;
      session.goneSince = Date.now();
    });
  }

  #session(router: string): Session {
    let s = this.#sessions.get(router);
    if (!s) {
      s = { id: router, epoch: randomUUID(), grants: new Map(), givenUp: new Map(), goneSince: Date.now() };
      this.#sessions.set(router, s);
    }
    return s;
  }

  #giveUp(session: Session, id: string): void {
    if (id === '' || id.length > MAX_GRANT_ID) return;
    session.givenUp.set(id, Date.now());
    // Bounded: the oldest go first (a map iterates in insertion order).
    if (session.givenUp.size > MAX_GIVEN_UP) session.givenUp.delete(session.givenUp.keys().next().value as string);
  }

  #grant(session: Session, lease: Lease, id: string = randomUUID()): GrantAnswer {
    const answer: GrantAnswer = {
      grant: id,
      address: lease.address ?? '',
      socketPath: lease.socketPath,
      instanceId: lease.instanceId,
      coldStart: lease.coldStart,
      leader: this.#o.identity,
      session: session.epoch,
    };
    session.grants.set(id, { id, lease, answer, revoked: false });
    return answer;
  }

  /** Revokes grants whose instance drains or went; gives back the grants of routers gone for good. */
  #sweepGrants(): void {
    const now = Date.now();
    for (const s of this.#sessions.values()) {
      if (s.goneSince !== undefined && now - s.goneSince > (this.#o.sessionGraceMs ?? SESSION_GRACE_MS)) {
        if (s.grants.size > 0) this.#o.logger.warn({ router: s.id, grants: s.grants.size }, 'a router went away: its grants are given back');
        for (const g of s.grants.values()) g.lease.release('ok');
        this.#sessions.delete(s.id);
        continue;
      }
      for (const [id, at] of s.givenUp) {
        if (now - at <= GIVEN_UP_MS) break;
        s.givenUp.delete(id);
      }
      const revoke: string[] = [];
      for (const g of s.grants.values()) {
        if (!g.revoked && g.lease.stale?.()) {
          g.revoked = true;
          revoke.push(g.id);
        }
      }
      if (revoke.length > 0) this.#send(s, { revoke });
    }
  }

  #broadcast(ev: ExecutorEvent): void {
    for (const s of this.#sessions.values()) this.#send(s, ev);
  }

  #send(s: Session, ev: ExecutorEvent): void {
    if (s.stream && !s.stream.writableEnded) s.stream.write(`${JSON.stringify(ev)}\n`);
  }

  #json(res: http.ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  }

  #fail(res: http.ServerResponse, err: unknown): void {
    const e = isFlintError(err) ? err : new FlintError('FLINT_ERR_INTERNAL', (err as Error)?.message ?? String(err));
    if (!isFlintError(err)) this.#o.logger.error({ err }, 'executor service request failed');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (e.retryAfterSeconds !== undefined) res.setHeader('retry-after', String(e.retryAfterSeconds));
    this.#json(res, e.status, e.toJSON());
  }
}

function routerOf(body: { router?: unknown } | undefined): string {
  if (typeof body?.router !== 'string' || body.router === '' || body.router.length > 256) {
    throw new FlintError('FLINT_ERR_VALIDATION', 'router: expected the router\'s id (a string of 1 to 256 characters)', { field: 'router' });
  }
  return body.router;
}

const MAX_GRANT_ID = 128;

function grantIdOf(v: unknown): string {
  if (v === undefined) return randomUUID();
  if (typeof v !== 'string' || v === '' || v.length > MAX_GRANT_ID) {
    throw new FlintError('FLINT_ERR_VALIDATION', `grant: expected an id (a string of 1 to ${MAX_GRANT_ID} characters)`, { field: 'grant' });
  }
  return v;
}

/** Enough of a Function for the core to key and version it; the leader's own watch holds the rest. */
function functionOf(v: unknown, field: string): FunctionResource {
  const m = (v as { metadata?: Record<string, unknown> } | undefined)?.metadata;
  for (const k of ['name', 'namespace', 'uid', 'resourceVersion']) {
    if (typeof m?.[k] !== 'string' || m[k] === '') throw new FlintError('FLINT_ERR_VALIDATION', `${field}.metadata.${k}: expected a string`, { field: `${field}.metadata.${k}` });
  }
  if (typeof (v as { spec?: unknown }).spec !== 'object' || (v as { spec?: unknown }).spec === null) {
    throw new FlintError('FLINT_ERR_VALIDATION', `${field}.spec: expected a map`, { field: `${field}.spec` });
  }
  return v as FunctionResource;
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY) throw new FlintError('FLINT_ERR_PAYLOAD_TOO_LARGE', `request body over ${MAX_BODY} bytes`);
    chunks.push(c as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new FlintError('FLINT_ERR_BAD_JSON', 'request body is not JSON');
  }
}
