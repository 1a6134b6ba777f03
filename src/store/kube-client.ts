// A deliberately narrow Kubernetes client: get, list, create, replace,
// server-side apply, delete and watch over plain fetch with a bearer
// token. The ingress provider and the kubernetes store need nothing more,
// and this keeps @kubernetes/client-node (and its start-up cost) out of
// local mode. undici is loaded only when a
// custom CA or skipped verification needs its own dispatcher.
// Every call rides out the API server's 429 (`storage is (re)initializing`
// after a restart or for a new CRD, or its in-flight limit) and its 503 with
// a retry time (`the request has been made before all known HTTP paths have
// been installed`, just after a restart) by waiting as told and asking
// again, within a bounded time: the server refused before doing anything,
// so even a write is safe to repeat.
import fs from 'node:fs';
import { type ErrorCode, FlintError } from '../api/errors.ts';

export interface GroupVersionResource {
  /** '' for the core group (`/api/v1`). */
  group: string;
  version: string;
  /** Plural, lower-case: `ingresses`. */
  resource: string;
}

export const INGRESS_GVR: GroupVersionResource = { group: 'networking.k8s.io', version: 'v1', resource: 'ingresses' };

export interface KubeObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: KubeObjectMeta;
  [key: string]: unknown;
}

export interface KubeList<T extends KubeObject> {
  items: T[];
  metadata: { resourceVersion?: string };
}

export type KubeWatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';

export interface KubeWatchEvent<T extends KubeObject = KubeObject> {
  type: KubeWatchEventType;
  object: T;
}

export interface KubeWatchOptions {
  /** Start after this version (a list's). */
  resourceVersion: string;
  /** The API server ends the stream after this long; the caller watches again from the last version seen. */
  timeoutSeconds?: number;
  labelSelector?: string;
  /** `spec.nodeName=<node>`: what a node agent watches. */
  fieldSelector?: string;
}

export interface KubeWatch {
  /**
   * Settles when the stream ends: resolves when the server closed it, rejects with a KubeApiError
   * (FLINT_ERR_GONE when the version is older than the server keeps) or FLINT_ERR_UNREACHABLE.
   */
  done: Promise<void>;
  close(): void;
}

/** Where a delete applies: only to this version or this incarnation of the object, and how soon. */
export interface KubeDeleteOptions {
  resourceVersion?: string;
  uid?: string;
  /** 0: at once, without the graceful wait (a node agent finishing a pod's deletion). */
  gracePeriodSeconds?: number;
}

/**
 * Objects are namespaced; `namespace` undefined names a cluster-scoped object (a Node) or, for list and watch,
 * every namespace.
 */
export interface KubeClient {
  /** undefined when the object does not exist. */
  get<T extends KubeObject>(gvr: GroupVersionResource, namespace: string | undefined, name: string): Promise<T | undefined>;
  list<T extends KubeObject>(gvr: GroupVersionResource, namespace: string | undefined, opts?: { labelSelector?: string; fieldSelector?: string }): Promise<KubeList<T>>;
  /** KubeApiError FLINT_ERR_ALREADY_EXISTS when the name is taken. */
  create<T extends KubeObject>(gvr: GroupVersionResource, namespace: string | undefined, obj: T): Promise<T>;
  /** POSTs to an object's subresource (`serviceaccounts/<name>/token`) and returns the answer. */
  createSubresource<T>(gvr: GroupVersionResource, namespace: string | undefined, name: string, subresource: string, body: unknown): Promise<T>;
  /**
   * Server-side apply: the fields `obj` sets become this field manager's, taken over from any other manager
   * (force), whatever the stored version; creates the object when there is none. Never a conflict.
   */
  apply<T extends KubeObject>(gvr: GroupVersionResource, namespace: string | undefined, name: string, obj: T, opts?: { fieldManager?: string }): Promise<T>;
  /** With metadata.resourceVersion set, a stale version fails with FLINT_ERR_CONFLICT. */
  replace<T extends KubeObject>(gvr: GroupVersionResource, namespace: string | undefined, name: string, obj: T): Promise<T>;
  /** Writes the status subresource only; same concurrency rule as replace. */
  replaceStatus<T extends KubeObject>(gvr: GroupVersionResource, namespace: string | undefined, name: string, obj: T): Promise<T>;
  /** false when there was nothing to delete. A precondition that does not hold fails with FLINT_ERR_CONFLICT. */
  delete(gvr: GroupVersionResource, namespace: string | undefined, name: string, opts?: KubeDeleteOptions): Promise<boolean>;
  /** Streams changes after opts.resourceVersion; namespace undefined: every namespace. */
  watch<T extends KubeObject>(
    gvr: GroupVersionResource,
    namespace: string | undefined,
    opts: KubeWatchOptions,
    onEvent: (ev: KubeWatchEvent<T>) => void,
  ): KubeWatch;
  /**
   * A pod's log: one container's output since it started, line by line; with follow, the stream
   * stays open until the container stops or close() is called. Settles like a watch.
   */
  podLog(namespace: string, pod: string, opts: { container: string; follow?: boolean }, onLine: (line: string) => void): KubeWatch;
}

/** An error answer from the API server, keeping its status and Kubernetes `reason`. */
export class KubeApiError extends FlintError {
  readonly httpStatus: number;
  readonly reason: string;

  constructor(code: ErrorCode, message: string, httpStatus: number, reason: string) {
    super(code, message);
    this.name = 'KubeApiError';
    this.httpStatus = httpStatus;
    this.reason = reason;
  }
}

export interface KubeClientOptions {
  /** `https://kubernetes.default.svc`. */
  baseUrl: string;
  /** A token, or a function read on each request (projected tokens rotate). */
  token?: string | (() => string | undefined);
  /** PEM CA bundle for the API server's certificate. */
  ca?: string;
  insecureSkipTLSVerify?: boolean;
  timeoutMs?: number;
  /** How long one call keeps retrying 429 answers (and 503s that name a retry time) before it fails (default 30 s). */
  retryBudgetMs?: number;
  /**
   * Each `Warning:` header the API server sent (an unknown field it dropped, a deprecated API), as its text.
   * A warning means Flint sent something the server did not take as meant.
   */
  onWarning?: (warning: string, request: { method: string; path: string }) => void;
}

/** The texts of a `Warning` header (RFC 7234 form `299 - "text"`, several joined by commas). */
export function parseWarnings(header: string | null): string[] {
  if (!header) return [];
  const out: string[] = [];
  for (const m of header.matchAll(/\d{3} \S+ "((?:[^"\\]|\\.)*)"/g)) out.push(m[1].replace(/\\(.)/g, '$1'));
  return out;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Options for running inside a pod: service host from the environment, the service account's token and CA. */
export function inClusterKubeClientOptions(env: NodeJS.ProcessEnv = process.env): KubeClientOptions {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host) throw new FlintError('FLINT_ERR_CONFIG', 'not running in a Kubernetes pod: KUBERNETES_SERVICE_HOST is not set');
  let cached: { token: string; at: number } | undefined;
  const token = () => {
    // Re-read now and then: the kubelet rotates projected tokens.
    if (!cached || Date.now() - cached.at > 60_000) cached = { token: fs.readFileSync(`${SA_DIR}/token`, 'utf8').trim(), at: Date.now() };
    return cached.token;
  };
  const h = host.includes(':') ? `[${host}]` : host;
  return { baseUrl: `https://${h}:${port}`, token, ca: fs.readFileSync(`${SA_DIR}/ca.crt`, 'utf8') };
}

function collectionPath(gvr: GroupVersionResource, namespace: string | undefined): string {
  const root = gvr.group === '' ? `/api/${gvr.version}` : `/apis/${gvr.group}/${gvr.version}`;
  return namespace === undefined ? `${root}/${gvr.resource}` : `${root}/namespaces/${encodeURIComponent(namespace)}/${gvr.resource}`;
}

/** The namespace a 404 is about when the API server says the namespace itself is missing. */
function missingNamespace(json: any): string | undefined {
  const d = json?.details;
  return d?.kind === 'namespaces' && !d.group && typeof d.name === 'string' ? d.name : undefined;
}

function codeFor(status: number, reason: string): ErrorCode {
  if (status === 404) return 'FLINT_ERR_NOT_FOUND';
  if (status === 409) return reason === 'AlreadyExists' ? 'FLINT_ERR_ALREADY_EXISTS' : 'FLINT_ERR_CONFLICT';
  if (status === 410) return 'FLINT_ERR_GONE';
  if (status === 400 || status === 422) return 'FLINT_ERR_VALIDATION';
  if (status === 401) return 'FLINT_ERR_UNAUTHORIZED';
  if (status === 403) return 'FLINT_ERR_FORBIDDEN';
  if (status === 429) return 'FLINT_ERR_TOO_MANY_REQUESTS';
  return 'FLINT_ERR_UNAVAILABLE';
}

type FetchLike = (url: string, init: Record<string, unknown>) => Promise<Response>;

/** Resolves after ms, or at once when the signal aborts. */
function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export function createKubeClient(opts: KubeClientOptions): KubeClient {
  const base = opts.baseUrl.replace(/\/+$/, '');
  const timeoutMs = opts.timeoutMs ?? 30_000;
  let fetcher: Promise<FetchLike> | undefined;

  function getFetch(): Promise<FetchLike> {
    fetcher ??= (async () => {
      if (!opts.ca && !opts.insecureSkipTLSVerify) return globalThis.fetch as unknown as FetchLike;
      const undici = await import('undici');
      const dispatcher = new undici.Agent({ connect: { ca: opts.ca, rejectUnauthorized: !opts.insecureSkipTLSVerify } });
      return (url, init) => undici.fetch(url, { ...init, dispatcher } as any) as unknown as Promise<Response>;
    })();
    return fetcher;
  }

  async function send(method: string, path: string, body: unknown, signal: AbortSignal, contentType = 'application/json'): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json' };
    const token = typeof opts.token === 'function' ? opts.token() : opts.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = contentType;
    const f = await getFetch();
    let res: Response;
    try {
      res = await f(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    } catch (err) {
      throw new FlintError('FLINT_ERR_UNREACHABLE', `Kubernetes API ${base} unreachable: ${(err as Error).message}`, { cause: err });
    }
    if (opts.onWarning) for (const w of parseWarnings(res.headers.get('warning'))) opts.onWarning(w, { method, path });
    return res;
  }

  async function readJson(res: Response): Promise<any> {
    const text = await res.text();
    try {
      return (text ? JSON.parse(text) : undefined) ?? text;
    } catch {
      return text;
    }
  }

  /**
   * send, again after the wait the server names for as long as it answers 429, or 503 with a retry time, and the
   * budget lasts.
   * `signal` makes each attempt's signal; `cancelled` ends the waiting between attempts.
   */
  async function sendRetrying(
    method: string,
    path: string,
    body: unknown,
    signal: () => AbortSignal,
    o: { contentType?: string; cancelled?: AbortSignal } = {},
  ): Promise<Response> {
    const started = Date.now();
    const budget = opts.retryBudgetMs ?? 30_000;
    for (let attempt = 1; ; attempt++) {
      const res = await send(method, path, body, signal(), o.contentType);
      if (res.status !== 429 && res.status !== 503) return res;
      const text = await res.text();
      let json: any = text;
      try {
        json = JSON.parse(text);
      } catch {}
      const header = Number(res.headers.get('retry-after'));
      const named = Number(json?.details?.retryAfterSeconds) || (Number.isFinite(header) && header > 0 ? header : 0);
      // A 503 without a retry time is an outage, not a server asking for patience.
      if (res.status === 503 && !named) return new Response(text, { status: res.status, headers: res.headers });
      const waitMs = Math.max(100, (named || 1) * 1000);
      if (Date.now() - started + waitMs > budget) {
        const err = apiError(method, path, { status: res.status, json });
        throw new KubeApiError(
          err.code,
          `${err.message} (still refused after ${attempt} attempts over ${Math.round((Date.now() - started) / 1000)} s; the API server may be overloaded or still starting)`,
          res.status,
          err.reason,
        );
      }
      await delay(waitMs, o.cancelled);
    }
  }

  async function call(method: string, path: string, body?: unknown, contentType?: string): Promise<{ status: number; json: any }> {
    const res = await sendRetrying(method, path, body, () => AbortSignal.timeout(timeoutMs), { contentType });
    return { status: res.status, json: await readJson(res) };
  }

  function apiError(method: string, path: string, r: { status: number; json: any }): KubeApiError {
    const reason = typeof r.json?.reason === 'string' ? r.json.reason : '';
    const message = typeof r.json?.message === 'string' ? r.json.message : String(r.json ?? '').slice(0, 200) || `status ${r.status}`;
    const ns = r.status === 404 ? missingNamespace(r.json) : undefined;
    if (ns !== undefined && !/\/namespaces(\?|$)/.test(path)) {
      return new KubeApiError(
        'FLINT_ERR_NAMESPACE_NOT_FOUND',
        `namespace '${ns}' does not exist in the cluster, so nothing can be written there: create it (kubectl create namespace ${ns}), or install Flint with its chart, which does (Kubernetes API ${method} ${path}: ${message})`,
        404,
        reason,
      );
    }
    return new KubeApiError(codeFor(r.status, reason), `Kubernetes API ${method} ${path}: ${message}`, r.status, reason);
  }

  function fail(method: string, path: string, r: { status: number; json: any }): never {
    throw apiError(method, path, r);
  }

  async function replaceAt<T>(path: string, obj: T): Promise<T> {
    const r = await call('PUT', path, obj);
    if (r.status !== 200 && r.status !== 201) fail('PUT', path, r);
    return r.json;
  }

  async function streamLines(res: Response, onLine: (line: string) => void): Promise<void> {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let pending = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      pending += decoder.decode(chunk, { stream: true });
      let nl = pending.indexOf('\n');
      while (nl >= 0) {
        // Leading whitespace is kept: a log's indented stack trace means something (JSON ignores it).
        const line = pending.slice(0, nl).replace(/\s+$/, '');
        pending = pending.slice(nl + 1);
        if (line) onLine(line);
        nl = pending.indexOf('\n');
      }
    }
    if (pending.trim()) onLine(pending.replace(/\s+$/, ''));
  }

  /** A long-lived GET whose answer is read line by line until it ends or is closed. */
  function stream(path: string, onLine: (line: string) => void): KubeWatch {
    const abort = new AbortController();
    const done = (async () => {
      const res = await sendRetrying('GET', path, undefined, () => abort.signal, { cancelled: abort.signal });
      if (res.status !== 200) fail('GET', path, { status: res.status, json: await readJson(res) });
      await streamLines(res, onLine);
    })().catch((err) => {
      if (abort.signal.aborted) return;
      if (err instanceof FlintError) throw err;
      throw new FlintError('FLINT_ERR_UNREACHABLE', `Kubernetes API ${base} stream ended: ${(err as Error).message}`, { cause: err });
    });
    return { done, close: () => abort.abort() };
  }

  return {
    async get(gvr, namespace, name) {
      const path = `${collectionPath(gvr, namespace)}/${encodeURIComponent(name)}`;
      const r = await call('GET', path);
      if (r.status === 404) return undefined;
      if (r.status !== 200) fail('GET', path, r);
      return r.json;
    },
    async list(gvr, namespace, o = {}) {
      const q = new URLSearchParams();
      if (o.labelSelector) q.set('labelSelector', o.labelSelector);
      if (o.fieldSelector) q.set('fieldSelector', o.fieldSelector);
      const path = collectionPath(gvr, namespace) + (q.size > 0 ? `?${q}` : '');
      const r = await call('GET', path);
      if (r.status !== 200) fail('GET', path, r);
      return { items: r.json.items ?? [], metadata: r.json.metadata ?? {} };
    },
    async create(gvr, namespace, obj) {
      const path = collectionPath(gvr, namespace);
      const r = await call('POST', path, obj);
      if (r.status !== 201 && r.status !== 200 && r.status !== 202) fail('POST', path, r);
      return r.json;
    },
    async createSubresource(gvr, namespace, name, subresource, body) {
      const path = `${collectionPath(gvr, namespace)}/${encodeURIComponent(name)}/${subresource}`;
      const r = await call('POST', path, body);
      if (r.status !== 201 && r.status !== 200) fail('POST', path, r);
      return r.json;
    },
    async apply(gvr, namespace, name, obj, o = {}) {
      const q = new URLSearchParams({ fieldManager: o.fieldManager ?? 'flint', force: 'true' });
      const path = `${collectionPath(gvr, namespace)}/${encodeURIComponent(name)}?${q}`;
      // JSON is YAML: the apply content type takes it as it is.
      const r = await call('PATCH', path, obj, 'application/apply-patch+yaml');
      if (r.status !== 200 && r.status !== 201) fail('PATCH', path, r);
      return r.json;
    },
    replace(gvr, namespace, name, obj) {
      return replaceAt(`${collectionPath(gvr, namespace)}/${encodeURIComponent(name)}`, obj);
    },
    replaceStatus(gvr, namespace, name, obj) {
      return replaceAt(`${collectionPath(gvr, namespace)}/${encodeURIComponent(name)}/status`, obj);
    },
    async delete(gvr, namespace, name, o = {}) {
      const path = `${collectionPath(gvr, namespace)}/${encodeURIComponent(name)}`;
      const preconditions = { ...(o.resourceVersion === undefined ? {} : { resourceVersion: o.resourceVersion }), ...(o.uid === undefined ? {} : { uid: o.uid }) };
      const body =
        Object.keys(preconditions).length === 0 && o.gracePeriodSeconds === undefined
          ? undefined
          : { kind: 'DeleteOptions', apiVersion: 'v1', preconditions, ...(o.gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds: o.gracePeriodSeconds }) };
      const r = await call('DELETE', path, body);
      if (r.status === 404) return false;
      if (r.status !== 200 && r.status !== 202) fail('DELETE', path, r);
      return true;
    },
    watch(gvr, namespace, o, onEvent) {
      const q = new URLSearchParams({ watch: '1', resourceVersion: o.resourceVersion, allowWatchBookmarks: 'true' });
      if (o.timeoutSeconds !== undefined) q.set('timeoutSeconds', String(o.timeoutSeconds));
      if (o.labelSelector) q.set('labelSelector', o.labelSelector);
      if (o.fieldSelector) q.set('fieldSelector', o.fieldSelector);
      const path = `${collectionPath(gvr, namespace)}?${q}`;
      return stream(path, (line) => {
        const ev = JSON.parse(line);
        // The server reports a failure inside the stream as an ERROR event carrying a Status (410 when the version is too old).
        if (ev.type === 'ERROR') throw apiError('GET', path, { status: ev.object?.code ?? 500, json: ev.object });
        onEvent(ev);
      });
    },
    podLog(namespace, pod, o, onLine) {
      const q = new URLSearchParams({ container: o.container });
      if (o.follow) q.set('follow', 'true');
      return stream(`/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/log?${q}`, onLine);
    },
  };
}
