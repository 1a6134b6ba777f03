// Calls to the executor leader (protocol.ts) for the routers and the
// controller: where the leader is comes from its Lease, which may still name
// a leader that died until the standby takes over, so a call that cannot
// connect is tried again, on whatever the Lease names by then, until its
// deadline.
import { errorFromBody, FlintError } from '../../api/errors.ts';
import type { InstancesReport } from '../../api/instances.ts';
import type { FileRange } from '../../fsafe/open.ts';
import type { AcquireRequest, GrantAnswer, GrantOpsRequest, ReattachAnswer, ReattachRequest } from './protocol.ts';
import { LOG_HEADERS, PATHS } from './protocol.ts';

export interface ServiceClientOptions {
  /** The leader's URL as its Lease names it; undefined while there is none. */
  leaderUrl(): string | undefined;
  /** The routers' token (the Secret `executor`). */
  token: string;
  /** How long a call keeps trying to reach a leader. */
  reachMs: number;
}

const RETRY_MS = 200;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An answer that means "ask again, elsewhere or later": no leader there (yet). */
function notLeader(res: Response, body: unknown): boolean {
  return res.status === 503 && /standby, not the leader/.test(String((body as { message?: unknown })?.message ?? ''));
}

export class ExecutorServiceClient {
  readonly #o: ServiceClientOptions;

  constructor(o: ServiceClientOptions) {
    this.#o = o;
  }

  get token(): string {
    return this.#o.token;
  }

  /** The leader's URL, waiting up to the deadline for the Lease to name one. */
  async leader(signal?: AbortSignal): Promise<string> {
    const deadline = Date.now() + this.#o.reachMs;
    for (;;) {
      const url = this.#o.leaderUrl();
      if (url) return url;
      if (Date.now() > deadline || signal?.aborted) throw new FlintError('FLINT_ERR_UNAVAILABLE', `no executor leader for ${this.#o.reachMs / 1000} s (Lease flint-executor)`, { retryAfterSeconds: 1 });
      await sleep(RETRY_MS);
    }
  }

  /** `read` takes a successful answer that is not JSON. */
  async #call<T>(method: 'GET' | 'POST', path: string, body: unknown, signal?: AbortSignal, read?: (res: Response) => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.#o.reachMs;
    let last: unknown;
    for (;;) {
      if (signal?.aborted) throw new FlintError('FLINT_ERR_UNAVAILABLE', 'request aborted');
      const url = await this.leader(signal);
      try {
        const res = await fetch(url + path, {
          method,
          headers: { authorization: `Bearer ${this.#o.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal,
        });
        if (res.status === 204) return undefined as T;
        if (res.ok && read) return await read(res);
        const answer = (await res.json().catch(() => undefined)) as unknown;
        if (res.ok) return answer as T;
        if (!notLeader(res, answer)) {
          const err = errorFromBody(answer, res.status);
          const retry = Number(res.headers.get('retry-after'));
          throw Number.isFinite(retry) && retry > 0 ? new FlintError(err.code, err.message, { retryAfterSeconds: retry }) : err;
        }
        last = errorFromBody(answer, res.status);
      } catch (err) {
        if (err instanceof FlintError) throw err;
        if (signal?.aborted) throw new FlintError('FLINT_ERR_UNAVAILABLE', 'request aborted');
        // Could not connect: the leader the Lease names is gone, or moving.
        last = err;
      }
      if (Date.now() > deadline) {
        throw new FlintError('FLINT_ERR_UNAVAILABLE', `the executor leader did not answer for ${this.#o.reachMs / 1000} s: ${(last as Error)?.message ?? last}`, {
          retryAfterSeconds: 1,
        });
      }
      await sleep(RETRY_MS);
    }
  }

  acquire(req: AcquireRequest, signal?: AbortSignal): Promise<GrantAnswer> {
    return this.#call('POST', PATHS.acquire, req, signal);
  }

  grants(req: GrantOpsRequest): Promise<void> {
    return this.#call('POST', PATHS.grants, req);
  }

  /** A function's log as the leader wrote it, from byte `from` (its tail without it): see FunctionLogSource. */
  functionLog(namespace: string, name: string, from: number | undefined): Promise<FileRange> {
    const query = from === undefined ? '' : `?from=${from}`;
    return this.#call('GET', `${PATHS.logs}/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}${query}`, undefined, undefined, async (res) => ({
      text: await res.text(),
      start: Number(res.headers.get(LOG_HEADERS.start)),
      next: Number(res.headers.get(LOG_HEADERS.next)),
      size: Number(res.headers.get(LOG_HEADERS.size)),
      file: res.headers.get(LOG_HEADERS.file) ?? '',
    }));
  }

  reattach(req: ReattachRequest): Promise<ReattachAnswer> {
    return this.#call('POST', PATHS.reattach, req);
  }

  instances(namespace: string, name: string): Promise<InstancesReport> {
    return this.#call('GET', `${PATHS.instances}/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`, undefined);
  }

  /** Opens the router's event stream at the leader; the caller reads NDJSON lines from the body. */
  async events(router: string, signal: AbortSignal): Promise<{ url: string; body: ReadableStream<Uint8Array> }> {
    const url = await this.leader(signal);
    const res = await fetch(`${url}${PATHS.events}?router=${encodeURIComponent(router)}`, { headers: { authorization: `Bearer ${this.#o.token}` }, signal });
    if (!res.ok || !res.body) {
      const answer = await res.json().catch(() => undefined);
      throw errorFromBody(answer, res.status);
    }
    return { url, body: res.body };
  }
}
