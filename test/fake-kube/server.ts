// A small fake of the Kubernetes API server, for tests that need no real
// one (scripts/kube has that). It serves resources by group/version/resource
// the way the real one answers the calls Flint makes: list (with
// labelSelector, in one namespace or all), get, create, replace,
// server-side apply (PATCH application/apply-patch+yaml), the status
// subresource, delete (with preconditions) and watch (replay from a
// resourceVersion, label-selected as the real one does, an ERROR event with
// 410 Expired for a version older than its history), with one global
// resourceVersion, Status bodies and the real status codes (404 NotFound,
// 409 AlreadyExists/Conflict, 422 Invalid, 401). What the real server does
// that a test may ask for: defaults filled into stored objects, `Warning:
// 299` headers for unknown fields, 404 for writes into a namespace that does
// not exist (requireNamespaces), and 429 `storage is (re)initializing` with
// Retry-After (failNext). Pod logs (`pods/<name>/log`) come from whatever
// runs the pods (the fake kubelet). New kinds are one entry in `resources`.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseLabelSelector } from '../../src/store/store.ts';

export interface FakeResource {
  /** '' for the core group. */
  group: string;
  version: string;
  /** Plural: `ingresses`. */
  resource: string;
  kind: string;
  /** Returns the reasons an object is invalid (422), as the API server's validation would. */
  validate?: (obj: any) => string[];
  /** With a status subresource, create and replace keep the stored status and only PUT .../status writes it. */
  statusSubresource?: boolean;
  /** Nodes, Namespaces: no namespace in the path. */
  clusterScoped?: boolean;
  /** Fills in what the real server defaults, on every write (so a stored object never equals what was sent). */
  defaults?: (obj: any) => void;
  /** The fields of an object its schema does not know, as `spec.foo`: each gets a `Warning: 299` header, and is kept. */
  unknownFields?: (obj: any) => string[];
}

export const INGRESS_RESOURCE: FakeResource = { group: 'networking.k8s.io', version: 'v1', resource: 'ingresses', kind: 'Ingress' };
export const NAMESPACE_RESOURCE: FakeResource = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', clusterScoped: true };

/**
 * One container's output for `GET .../pods/<name>/log`: everything so far goes to `write`; with follow,
 * later output too until the container stops (`end`). Returns a function that stops following, or
 * undefined when the pod runs no such container.
 */
export type PodLogSource = (
  namespace: string,
  pod: string,
  container: string,
  follow: boolean,
  out: { write(text: string): void; end(): void },
) => (() => void) | undefined;

export interface FakeKubeOptions {
  /** Required bearer token; omit to accept anonymous calls. */
  token?: string;
  resources?: FakeResource[];
  /** Changes kept for watches to resume from (etcd compacts its history the same way). */
  historyLimit?: number;
  /** Writes into a namespace with no Namespace object fail with the real server's 404 (NAMESPACE_RESOURCE must be served). */
  requireNamespaces?: boolean;
}

export interface RecordedRequest {
  method: string;
  path: string;
  body?: any;
}

export interface FakeKube {
  url: string;
  token: string | undefined;
  requests: RecordedRequest[];
  /** Objects of one resource, optionally in one namespace, sorted by namespace and name. */
  objects(resource: string, namespace?: string): any[];
  /** Writes an object directly (as another client would), bumping its resourceVersion. */
  put(resource: string, obj: any): any;
  /**
   * The next `count` requests matching method (and path substring) fail with `status`: 429 as the real server's
   * `storage is (re)initializing` (Retry-After `retryAfterSeconds`, default 1), 503 with retryAfterSeconds as its
   * `before all known HTTP paths have been installed` just after a restart, 403 Forbidden, others a plain failure.
   */
  failNext(match: { method: string; path?: string }, status: number, count?: number, opts?: { retryAfterSeconds?: number }): void;
  /** Forgets every failure failNext asked for that has not happened yet. */
  clearFailures(): void;
  /** Ends every open watch stream, as the API server does when a watch times out or it restarts. */
  endWatches(): void;
  /** Forgets the change history, as a compaction does: a watch from an older version gets 410 Expired. */
  compact(): void;
  /** Open watch streams. */
  watchCount(): number;
  /** Where pod logs are read from. */
  setPodLogs(source: PodLogSource): void;
  close(): Promise<void>;
}

function status(code: number, reason: string, message: string, details?: Record<string, unknown>) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

function send(res: http.ServerResponse, code: number, body: unknown, headers: Record<string, string | string[]> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const isObject = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Server-side apply, as far as one field manager goes: what it applied before and no longer does goes; the rest merges (lists whole). */
function applyMerge(current: any, lastApplied: any, next: any): any {
  const out: Record<string, any> = { ...current };
  for (const k of Object.keys(isObject(lastApplied) ? lastApplied : {})) if (!(k in next)) delete out[k];
  for (const [k, v] of Object.entries(next)) {
    out[k] = isObject(v) && isObject(out[k]) ? applyMerge(out[k], isObject(lastApplied) ? lastApplied[k] : undefined, v) : structuredClone(v);
  }
  return out;
}

const ROUTE =
  /^\/(?:api\/(?<coreVersion>[^/]+)|apis\/(?<group>[^/]+)\/(?<version>[^/]+))(?:\/namespaces\/(?<ns>[^/]+))?\/(?<resource>[^/]+)(?:\/(?<name>[^/]+)(?<sub>\/status|\/log)?)?$/;

interface Change {
  rv: number;
  resourceKey: string;
  namespace: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: any;
  /** The object before a MODIFIED: a label-selected watch sees it leave or enter its selection. */
  previous?: any;
}

interface Watcher {
  resourceKey: string;
  namespace: string | undefined;
  match: (labels: Record<string, string> | undefined) => boolean;
  res: http.ServerResponse;
}

export async function startFakeKube(opts: FakeKubeOptions = {}): Promise<FakeKube> {
  // Every API server serves Namespaces, whatever else a test asks for.
  const asked = opts.resources ?? [INGRESS_RESOURCE];
  const resources = asked.some((r) => r.resource === 'namespaces' && r.group === '') ? asked : [...asked, NAMESPACE_RESOURCE];
  // key: resource|namespace|name
  const store = new Map<string, any>();
  const requests: RecordedRequest[] = [];
  const failures: Array<{ method: string; path?: string; status: number; count: number; retryAfterSeconds: number }> = [];
  /** What each field manager last applied, by object key and manager. */
  const applied = new Map<string, any>();
  let rv = 1000;
  const historyLimit = opts.historyLimit ?? 1000;
  let history: Change[] = [];
  /** Versions at or below this one are no longer in the history. */
  let compactedTo = rv;
  const watchers = new Set<Watcher>();
  let podLogs: PodLogSource | undefined;

  const resourceKeyOf = (r: FakeResource) => `${r.resource}.${r.group}`;
  function record(r: FakeResource, type: Change['type'], object: any, previous?: any): void {
    const change: Change = {
      rv,
      resourceKey: resourceKeyOf(r),
      namespace: object.metadata.namespace,
      type,
      object: structuredClone(object),
      ...(type === 'MODIFIED' && previous ? { previous: structuredClone(previous) } : {}),
    };
    history.push(change);
    if (history.length > historyLimit) {
      const dropped = history.splice(0, history.length - historyLimit);
      compactedTo = dropped[dropped.length - 1].rv;
    }
    for (const w of watchers) if (w.resourceKey === change.resourceKey && (w.namespace === undefined || w.namespace === change.namespace)) writeEvent(w, change);
  }
  /** As the real server does for a label-selected watch: an object that stops matching is DELETED for it, one that starts is ADDED. */
  function writeEvent(w: Watcher, change: Change): void {
    const now = w.match(change.object.metadata.labels);
    const before = change.previous ? w.match(change.previous.metadata.labels) : now;
    let type = change.type;
    if (type === 'MODIFIED' && now && !before) type = 'ADDED';
    else if (type === 'MODIFIED' && !now && before) type = 'DELETED';
    else if (!now && !before) return;
    w.res.write(`${JSON.stringify({ type, object: change.object })}\n`);
  }

  const keyOf = (r: FakeResource, ns: string, name: string) => `${r.resource}.${r.group}|${ns}|${name}`;
  const qualified = (r: FakeResource) => (r.group ? `${r.resource}.${r.group}` : r.resource);
  const apiVersion = (r: FakeResource) => (r.group ? `${r.group}/${r.version}` : r.version);
  const now = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  const byName = (resource: string) => {
    const r = resources.find((x) => x.resource === resource || `${x.resource}.${x.group}` === resource);
    if (!r) throw new Error(`fake kube serves no resource '${resource}'`);
    return r;
  };

  async function readBody(req: http.IncomingMessage): Promise<string> {
    let text = '';
    req.setEncoding('utf8');
    for await (const c of req) text += c;
    return text;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const method = req.method ?? 'GET';
    const text = method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE' ? await readBody(req) : '';
    let body: any;
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        return send(res, 400, status(400, 'BadRequest', 'the body of the request was in an unknown format'));
      }
    }
    requests.push({ method, path: url.pathname + url.search, body });
    if (opts.token !== undefined && req.headers.authorization !== `Bearer ${opts.token}`) {
      return send(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    }
    const f = failures.find((x) => x.method === method && (!x.path || url.pathname.includes(x.path)));
    if (f) {
      if (--f.count <= 0) failures.splice(failures.indexOf(f), 1);
      if (f.status === 429) {
        const body = status(429, 'TooManyRequests', 'storage is (re)initializing', { retryAfterSeconds: f.retryAfterSeconds });
        return send(res, 429, body, { 'retry-after': String(f.retryAfterSeconds) });
      }
      if (f.status === 503 && f.retryAfterSeconds > 0) {
        const message = 'the request has been made before all known HTTP paths have been installed, please try again';
        return send(res, 503, status(503, 'ServiceUnavailable', message, { retryAfterSeconds: f.retryAfterSeconds }), { 'retry-after': String(f.retryAfterSeconds) });
      }
      const reason = f.status === 409 ? 'Conflict' : f.status === 500 ? 'InternalError' : f.status === 403 ? 'Forbidden' : 'Failure';
      return send(res, f.status, status(f.status, reason, `injected failure ${f.status}`));
    }
    const m = ROUTE.exec(url.pathname);
    const g = m?.groups;
    const group = g?.group ?? '';
    const version = g?.coreVersion ?? g?.version;
    const r = g && resources.find((x) => x.group === group && x.version === version && x.resource === g.resource);
    if (!g || !r) return send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    if (g.ns === undefined && !r.clusterScoped && !(method === 'GET' && g.name === undefined)) {
      return send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    }
    if (opts.requireNamespaces && !r.clusterScoped && g.ns !== undefined && (method === 'POST' || method === 'PUT' || method === 'PATCH')) {
      const nsName = decodeURIComponent(g.ns);
      if (!store.has(keyOf(NAMESPACE_RESOURCE, '', nsName))) {
        return send(res, 404, status(404, 'NotFound', `namespaces "${nsName}" not found`, { name: nsName, kind: 'namespaces' }));
      }
    }
    const ns = g.ns === undefined ? '' : decodeURIComponent(g.ns);
    const name = g.name === undefined ? undefined : decodeURIComponent(g.name);
    const notFound = (n: string) => send(res, 404, status(404, 'NotFound', `${qualified(r)} "${n}" not found`, { name: n, group: r.group, kind: r.resource }));

    if (g.sub === '/log') {
      if (r.resource !== 'pods' || method !== 'GET') return send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
      const pod = store.get(keyOf(r, ns, name!));
      if (!pod) return notFound(name!);
      const names: string[] = (pod.spec?.containers ?? []).map((c: any) => c.name);
      const container = url.searchParams.get('container') ?? (names.length === 1 ? names[0] : undefined);
      if (!container) return send(res, 400, status(400, 'BadRequest', `a container name must be specified for pod ${name}, choose one of: [${names.join(' ')}]`));
      if (!names.includes(container)) return send(res, 400, status(400, 'BadRequest', `container ${container} is not valid for pod ${name}`));
      let ended = false;
      const out = {
        write: (t: string) => {
          if (!ended) res.write(t);
        },
        end: () => {
          if (!ended) res.end();
          ended = true;
        },
      };
      res.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' });
      const follow = url.searchParams.get('follow') === 'true';
      const stop = podLogs?.(ns, name!, container, follow, out);
      if (!stop) return out.end();
      if (!follow) {
        stop();
        return out.end();
      }
      res.on('close', () => {
        ended = true;
        stop();
      });
      return;
    }
    let match: (l: Record<string, string> | undefined) => boolean = () => true;
    const sel = url.searchParams.get('labelSelector');
    if (sel && method === 'GET') {
      try {
        match = parseLabelSelector(sel);
      } catch (err) {
        return send(res, 400, status(400, 'BadRequest', `unable to parse requirement: ${(err as Error).message}`));
      }
    }
    if (method === 'GET' && name === undefined && url.searchParams.get('watch') === '1') {
      const since = Number(url.searchParams.get('resourceVersion') ?? rv);
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      if (since < compactedTo) {
        res.end(`${JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', `too old resource version: ${since} (${compactedTo + 1})`) })}\n`);
        return;
      }
      const w: Watcher = { resourceKey: resourceKeyOf(r), namespace: g.ns === undefined ? undefined : ns, match, res };
      for (const c of history) if (c.rv > since && c.resourceKey === w.resourceKey && (w.namespace === undefined || w.namespace === c.namespace)) writeEvent(w, c);
      watchers.add(w);
      const timeout = Number(url.searchParams.get('timeoutSeconds') ?? 0);
      const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
      res.on('close', () => {
        clearTimeout(timer);
        watchers.delete(w);
      });
      return;
    }
    if (method === 'GET' && name === undefined) {
      const prefix = g.ns === undefined ? `${r.resource}.${r.group}|` : `${r.resource}.${r.group}|${ns}|`;
      const items = [...store.entries()]
        .filter(([k, o]) => k.startsWith(prefix) && match(o.metadata.labels))
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([, o]) => o);
      return send(res, 200, { apiVersion: apiVersion(r), kind: `${r.kind}List`, metadata: { resourceVersion: String(rv) }, items });
    }
    if (method === 'GET') {
      const o = store.get(keyOf(r, ns, name!));
      return o ? send(res, 200, o) : notFound(name!);
    }
    if (method === 'DELETE' && name !== undefined) {
      const k = keyOf(r, ns, name);
      const o = store.get(k);
      if (!o) return notFound(name);
      const want = body?.preconditions?.resourceVersion;
      if (want !== undefined && want !== o.metadata.resourceVersion) {
        return send(
          res,
          409,
          status(409, 'Conflict', `Operation cannot be fulfilled on ${qualified(r)} "${name}": the ResourceVersion in the precondition (${want}) does not match the ResourceVersion in record (${o.metadata.resourceVersion}). The object might have been modified`),
        );
      }
      store.delete(k);
      rv++;
      record(r, 'DELETED', { ...o, metadata: { ...o.metadata, resourceVersion: String(rv) } });
      return send(res, 200, o);
    }
    if (method === 'PUT' && name !== undefined && g.sub) {
      if (!r.statusSubresource) return send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
      const k = keyOf(r, ns, name);
      const current = store.get(k);
      if (!current) return notFound(name);
      const want = body?.metadata?.resourceVersion;
      if (want !== undefined && want !== current.metadata.resourceVersion) {
        return send(res, 409, status(409, 'Conflict', `Operation cannot be fulfilled on ${qualified(r)} "${name}": the object has been modified; please apply your changes to the latest version and try again`));
      }
      const stored = { ...structuredClone(current), status: structuredClone(body?.status) };
      if (stored.status === undefined) delete stored.status;
      const problems = r.validate?.(stored) ?? [];
      if (problems.length > 0) return send(res, 422, status(422, 'Invalid', `${r.kind}.${r.group} "${name}" is invalid: ${problems.join(', ')}`));
      rv++;
      stored.metadata.resourceVersion = String(rv);
      store.set(k, stored);
      record(r, 'MODIFIED', stored, current);
      return send(res, 200, stored);
    }
    if (g.sub) return send(res, 405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
    const warnings: string[] = [];
    const write = (method: string, body: any, okStatus: number) => {
      if (!body || typeof body !== 'object' || Array.isArray(body)) return send(res, 400, status(400, 'BadRequest', 'the body must be an object'));
      if (body.kind !== r.kind || body.apiVersion !== apiVersion(r)) {
        return send(res, 400, status(400, 'BadRequest', `the body is ${body.apiVersion}/${body.kind}, expected ${apiVersion(r)}/${r.kind}`));
      }
      const meta = body.metadata ?? {};
      if (meta.namespace !== undefined && meta.namespace !== ns) {
        return send(res, 400, status(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request'));
      }
      const objName = meta.name ?? (method === 'POST' && meta.generateName ? `${meta.generateName}${randomUUID().slice(0, 5)}` : undefined);
      if (!objName) return send(res, 422, status(422, 'Invalid', `${r.kind}.${r.group} "" is invalid: metadata.name: Required value: name or generateName is required`));
      if (method === 'PUT' && objName !== name) {
        return send(res, 400, status(400, 'BadRequest', `the name of the object (${objName}) does not match the name on the URL (${name})`));
      }
      const k = keyOf(r, ns, objName);
      const current = store.get(k);
      if (r.clusterScoped) delete meta.namespace;
      if (method === 'POST' && current) {
        return send(res, 409, status(409, 'AlreadyExists', `${qualified(r)} "${objName}" already exists`, { name: objName, group: r.group, kind: r.resource }));
      }
      if (method === 'PUT' && !current) return notFound(objName);
      if (method === 'PUT' && meta.resourceVersion !== undefined && meta.resourceVersion !== current.metadata.resourceVersion) {
        return send(
          res,
          409,
          status(409, 'Conflict', `Operation cannot be fulfilled on ${qualified(r)} "${objName}": the object has been modified; please apply your changes to the latest version and try again`, {
            name: objName,
            group: r.group,
            kind: r.resource,
          }),
        );
      }
      const stored = structuredClone(body);
      // The server owns these; whatever the client sent is replaced.
      if (r.statusSubresource) delete stored.status;
      stored.metadata = { ...meta, name: objName, ...(r.clusterScoped ? {} : { namespace: ns }) };
      delete stored.metadata.generateName;
      r.defaults?.(stored);
      const problems = r.validate?.(stored) ?? [];
      if (problems.length > 0) {
        return send(res, 422, status(422, 'Invalid', `${r.kind}.${r.group} "${objName}" is invalid: ${problems.join(', ')}`, { name: objName, group: r.group, kind: r.kind }));
      }
      rv++;
      stored.metadata.resourceVersion = String(rv);
      stored.metadata.uid = current?.metadata.uid ?? randomUUID();
      stored.metadata.creationTimestamp = current?.metadata.creationTimestamp ?? now();
      const specChanged = !current || JSON.stringify(current.spec) !== JSON.stringify(stored.spec);
      stored.metadata.generation = (current?.metadata.generation ?? 0) + (specChanged ? 1 : 0);
      if (r.statusSubresource && current?.status) stored.status = current.status;
      store.set(k, stored);
      record(r, current ? 'MODIFIED' : 'ADDED', stored, current);
      return send(res, okStatus, stored, warnings.length > 0 ? { warning: warnings } : {});
    };
    if (method === 'PATCH' && name !== undefined) {
      if (req.headers['content-type'] !== 'application/apply-patch+yaml') {
        return send(res, 415, status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/apply-patch+yaml`));
      }
      const manager = url.searchParams.get('fieldManager');
      if (!manager) return send(res, 400, status(400, 'BadRequest', 'PATCH requests of type apply require fieldManager'));
      if (!isObject(body) || body.kind !== r.kind || body.apiVersion !== apiVersion(r)) return send(res, 400, status(400, 'BadRequest', `the body is not a ${apiVersion(r)}/${r.kind}`));
      // The real server refuses what the schema does not know, rather than warn.
      const unknown = r.unknownFields?.(body) ?? [];
      if (unknown.length > 0) return send(res, 500, status(500, 'InternalError', `failed to create typed patch object: .${unknown[0]}: field not declared in schema`));
      const k = keyOf(r, ns, name);
      const current = store.get(k);
      const appliedKey = `${k}|${manager}`;
      const merged = current ? applyMerge(current, applied.get(appliedKey), body) : structuredClone(body);
      // Applied over whatever version is stored: the apply names none.
      if (merged.metadata) delete merged.metadata.resourceVersion;
      if (current) merged.metadata.resourceVersion = current.metadata.resourceVersion;
      applied.set(appliedKey, structuredClone(body));
      return write(current ? 'PUT' : 'POST', merged, current ? 200 : 201);
    }
    if ((method === 'POST' && name === undefined) || (method === 'PUT' && name !== undefined)) {
      warnings.push(...(r.unknownFields?.(body) ?? []).map((f) => `299 - "unknown field \\"${f}\\""`));
      return write(method, body, method === 'POST' ? 201 : 200);
    }
    send(res, 405, status(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`));
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => send(res, 500, status(500, 'InternalError', String(err))));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${addr.port}`,
    token: opts.token,
    requests,
    objects(resource, namespace) {
      const r = byName(resource);
      const prefix = `${r.resource}.${r.group}|${namespace === undefined ? '' : `${namespace}|`}`;
      return [...store.entries()]
        .filter(([k]) => k.startsWith(prefix))
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([, o]) => structuredClone(o));
    },
    put(resource, obj) {
      const r = byName(resource);
      const ns = r.clusterScoped ? '' : (obj.metadata.namespace ?? 'default');
      const k = keyOf(r, ns, obj.metadata.name);
      const current = store.get(k);
      rv++;
      const stored = structuredClone(obj);
      stored.metadata = {
        ...stored.metadata,
        ...(r.clusterScoped ? {} : { namespace: ns }),
        resourceVersion: String(rv),
        uid: current?.metadata.uid ?? randomUUID(),
        creationTimestamp: current?.metadata.creationTimestamp ?? now(),
        generation: (current?.metadata.generation ?? 0) + 1,
      };
      store.set(k, stored);
      record(r, current ? 'MODIFIED' : 'ADDED', stored, current);
      return structuredClone(stored);
    },
    failNext(match, code, count = 1, o = {}) {
      failures.push({ ...match, status: code, count, retryAfterSeconds: o.retryAfterSeconds ?? (code === 429 ? 1 : 0) });
    },
    clearFailures() {
      failures.length = 0;
    },
    endWatches() {
      for (const w of watchers) w.res.end();
      watchers.clear();
    },
    compact() {
      if (history.length > 0) compactedTo = history[history.length - 1].rv;
      history = [];
    },
    watchCount: () => watchers.size,
    setPodLogs(source) {
      podLogs = source;
    },
    async close() {
      for (const w of watchers) w.res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
