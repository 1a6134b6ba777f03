// A deliberately narrow Kubernetes client: get, list, create, replace and
// delete of namespaced objects over plain fetch with a bearer token. The
// ingress provider needs nothing more, and this keeps @kubernetes/client-node
// (and its start-up cost) out of local mode. undici is loaded only when a
// custom CA or skipped verification needs its own dispatcher.
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

export interface KubeClient {
  /** undefined when the object does not exist. */
  get<T extends KubeObject>(gvr: GroupVersionResource, namespace: string, name: string): Promise<T | undefined>;
  list<T extends KubeObject>(gvr: GroupVersionResource, namespace: string, opts?: { labelSelector?: string }): Promise<KubeList<T>>;
  /** KubeApiError FLINT_ERR_ALREADY_EXISTS when the name is taken. */
  create<T extends KubeObject>(gvr: GroupVersionResource, namespace: string, obj: T): Promise<T>;
  /** With metadata.resourceVersion set, a stale version fails with FLINT_ERR_CONFLICT. */
  replace<T extends KubeObject>(gvr: GroupVersionResource, namespace: string, name: string, obj: T): Promise<T>;
  /** false when there was nothing to delete. */
  delete(gvr: GroupVersionResource, namespace: string, name: string): Promise<boolean>;
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

function collectionPath(gvr: GroupVersionResource, namespace: string): string {
  const root = gvr.group === '' ? `/api/${gvr.version}` : `/apis/${gvr.group}/${gvr.version}`;
  return `${root}/namespaces/${encodeURIComponent(namespace)}/${gvr.resource}`;
}

function codeFor(status: number, reason: string): ErrorCode {
  if (status === 404) return 'FLINT_ERR_NOT_FOUND';
  if (status === 409) return reason === 'AlreadyExists' ? 'FLINT_ERR_ALREADY_EXISTS' : 'FLINT_ERR_CONFLICT';
  if (status === 400 || status === 422) return 'FLINT_ERR_VALIDATION';
  if (status === 401) return 'FLINT_ERR_UNAUTHORIZED';
  if (status === 403) return 'FLINT_ERR_FORBIDDEN';
  if (status === 429) return 'FLINT_ERR_TOO_MANY_REQUESTS';
  return 'FLINT_ERR_UNAVAILABLE';
}

type FetchLike = (url: string, init: Record<string, unknown>) => Promise<Response>;

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

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
    const headers: Record<string, string> = { accept: 'application/json' };
    const token = typeof opts.token === 'function' ? opts.token() : opts.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const f = await getFetch();
    let res: Response;
    try {
      res = await f(base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new FlintError('FLINT_ERR_UNREACHABLE', `Kubernetes API ${base} unreachable: ${(err as Error).message}`, { cause: err });
    }
    const text = await res.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, json: json ?? text };
  }

  function fail(method: string, path: string, r: { status: number; json: any }): never {
    const reason = typeof r.json?.reason === 'string' ? r.json.reason : '';
    const message = typeof r.json?.message === 'string' ? r.json.message : String(r.json ?? '').slice(0, 200) || `status ${r.status}`;
    throw new KubeApiError(codeFor(r.status, reason), `Kubernetes API ${method} ${path}: ${message}`, r.status, reason);
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
      const q = o.labelSelector ? `?labelSelector=${encodeURIComponent(o.labelSelector)}` : '';
      const path = collectionPath(gvr, namespace) + q;
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
    async replace(gvr, namespace, name, obj) {
      const path = `${collectionPath(gvr, namespace)}/${encodeURIComponent(name)}`;
      const r = await call('PUT', path, obj);
      if (r.status !== 200 && r.status !== 201) fail('PUT', path, r);
      return r.json;
    },
    async delete(gvr, namespace, name) {
      const path = `${collectionPath(gvr, namespace)}/${encodeURIComponent(name)}`;
      const r = await call('DELETE', path);
      if (r.status === 404) return false;
      if (r.status !== 200 && r.status !== 202) fail('DELETE', path, r);
      return true;
    },
  };
}
