// The CLI's client of the control-plane API. Errors come back as FlintErrors
// with the server's code, so the CLI exits with the registry's exit code.
import fs from 'node:fs';
import { errorFromBody, FlintError, isFlintError } from '../api/errors.ts';
import type { AnyResource, KindMap, KindName } from '../api/kinds.ts';
import { KIND_PLURALS } from '../api/names.ts';
import type { TokenResponse } from '../api/token-request.ts';
import { type HttpResponse, httpRequest } from './http.ts';

/** An `Authorization: Basic` value (RFC 7617). */
export function basicAuthorization(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

export const DEFAULT_URL = 'http://127.0.0.1:8888';

export interface ClientOptions {
  baseUrl: string;
  token?: string;
  /** The administrator's username and password: exchanged once, at the first call, for a control-plane token. */
  login?: { username: string; password: string };
  /** What to say when the control plane answers 401. */
  unauthorizedHint?: string;
  onWarning?: (message: string) => void;
}

export class ApiClient {
  readonly baseUrl: string;
  readonly #login: { username: string; password: string } | undefined;
  #authorization: Promise<string | undefined> | undefined;
  readonly #onWarning: (m: string) => void;
  readonly #unauthorizedHint: string | undefined;

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.#login = opts.login;
    if (opts.token) this.#authorization = Promise.resolve(`Bearer ${opts.token}`);
    else if (opts.login === undefined) this.#authorization = Promise.resolve(undefined);
    this.#onWarning = opts.onWarning ?? (() => {});
    this.#unauthorizedHint = opts.unauthorizedHint;
  }

  /** The Authorization value of every call: the token given, or the control-plane token the login is exchanged for (once). */
  #auth(): Promise<string | undefined> {
    if (this.#authorization === undefined) {
      const { username, password } = this.#login as { username: string; password: string };
      this.#authorization = this.issueToken({ audience: 'control-plane' }, basicAuthorization(username, password)).then(
        (t) => `Bearer ${t.accesstoken}`,
        (err: unknown) => {
          if (!isFlintError(err) || err.code !== 'FLINT_ERR_UNAUTHORIZED' || this.#unauthorizedHint === undefined) throw err;
          throw new FlintError('FLINT_ERR_UNAUTHORIZED', `${this.#unauthorizedHint} (the control plane said: ${err.message})`);
        },
      );
      // A failed exchange is tried again by the next call rather than remembered.
      this.#authorization.catch(() => {
        this.#authorization = undefined;
      });
    }
    return this.#authorization;
  }

  async raw(
    method: string,
    path: string,
    body?: unknown,
    bytes?: { stream: fs.ReadStream; contentType: string },
    authorization?: string,
  ): Promise<HttpResponse> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (bytes) headers['content-type'] = bytes.contentType;
    const auth = authorization ?? (await this.#auth());
    if (auth) headers.authorization = auth;
    let res: HttpResponse;
    try {
      const payload = bytes ? bytes.stream : body === undefined ? undefined : JSON.stringify(body);
      res = await httpRequest(this.baseUrl + path, { method, headers, body: payload });
    } catch (err) {
      throw new FlintError(
        'FLINT_ERR_UNREACHABLE',
        `cannot reach the Flint control plane at ${this.baseUrl}: ${(err as { code?: string }).code ?? (err as Error).message} (is 'flint server' running? set FLINT_URL)`,
      );
    }
    const warnings = res.header('x-flint-warnings');
    if (warnings) {
      try {
        for (const w of JSON.parse(warnings) as string[]) this.#onWarning(w);
      } catch {
        this.#onWarning(warnings);
      }
    }
    // With credentials of its own (token create --username), the server's answer says it best.
    if (res.status === 401 && this.#unauthorizedHint && authorization === undefined) {
      const said = (errorFromBody(await res.json().catch(() => undefined), 401) as FlintError).message;
      throw new FlintError('FLINT_ERR_UNAUTHORIZED', `${this.#unauthorizedHint} (the control plane said: ${said})`);
    }
    if (!res.ok) {
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const err = errorFromBody(parsed, res.status);
      if (parsed === undefined) throw new FlintError(err.code, `the control plane answered ${res.status}: ${text.slice(0, 300)}`);
      throw err;
    }
    return res;
  }

  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await (await this.raw(method, path, body)).json()) as T;
  }

  #path(kind: KindName, ns: string, name?: string): string {
    const base = `/v1/namespaces/${encodeURIComponent(ns)}/${KIND_PLURALS[kind]}`;
    return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
  }

  get<K extends KindName>(kind: K, ns: string, name: string): Promise<KindMap[K]> {
    return this.json('GET', this.#path(kind, ns, name));
  }

  async tryGet<K extends KindName>(kind: K, ns: string, name: string): Promise<KindMap[K] | undefined> {
    try {
      return await this.get(kind, ns, name);
    } catch (err) {
      if ((err as FlintError).code === 'FLINT_ERR_NOT_FOUND') return undefined;
      throw err;
    }
  }

  async list<K extends KindName>(kind: K, ns: string | undefined, labelSelector?: string): Promise<KindMap[K][]> {
    const path = ns === undefined ? `/v1/${KIND_PLURALS[kind]}` : this.#path(kind, ns);
    const q = labelSelector ? `?labelSelector=${encodeURIComponent(labelSelector)}` : '';
    return (await this.json<{ items: KindMap[K][] }>('GET', path + q)).items;
  }

  create<T extends AnyResource>(obj: Omit<T, 'metadata' | 'apiVersion'> & { metadata: { name: string; namespace: string; labels?: Record<string, string> } }): Promise<T> {
    return this.json('POST', this.#path(obj.kind as KindName, obj.metadata.namespace), { apiVersion: 'flint.dev/v1', ...obj });
  }

  update<T extends AnyResource>(obj: T): Promise<T> {
    return this.json('PUT', this.#path(obj.kind, obj.metadata.namespace, obj.metadata.name), obj);
  }

  delete(kind: KindName, ns: string, name: string, force = false): Promise<AnyResource> {
    return this.json('DELETE', this.#path(kind, ns, name) + (force ? '?force=true' : ''));
  }

  /** Streams a file to the archive store; the answer's url and checksum go into a package. */
  async uploadArchive(file: string, sha256: string): Promise<{ url: string; checksum: { type: 'sha256'; sum: string }; size: number }> {
    const stream = fs.createReadStream(file);
    return (await (await this.raw('POST', `/v1/archives?sha256=${sha256}`, undefined, { stream, contentType: 'application/octet-stream' })).json()) as {
      url: string;
      checksum: { type: 'sha256'; sum: string };
      size: number;
    };
  }

  /** POST /v1/tokens: a token for the administrator; `authorization` overrides the client's own (Basic credentials). */
  async issueToken(request: Record<string, unknown>, authorization?: string): Promise<TokenResponse> {
    return (await (await this.raw('POST', '/v1/tokens', request, undefined, authorization)).json()) as TokenResponse;
  }

  info(): Promise<{ mode: 'local' | 'kubernetes'; routerUrl: string; authentication: { enabled: boolean; authUriPath: string }; messageQueueTypes?: string[] }> {
    return this.json('GET', '/v1/info');
  }
}
