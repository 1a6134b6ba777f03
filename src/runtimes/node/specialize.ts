// Specialization: turning this generic worker into one function, once.
// v2: POST /v2/specialize {filepath, functionName, env?} (Fission's extra
// keys, FunctionMetadata and the rest, are accepted and ignored).
// v1: POST /specialize with any body loads the codepath (/userfunc/user).
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { readBody } from './body.ts';
import { type Handler, LoadError, loadHandler } from './loader.ts';
import { sendJson } from './respond.ts';

const MAX_SPECIALIZE_BODY = 1024 * 1024;

export interface SpecializeRequest {
  filepath: string;
  functionName?: string;
  env?: Record<string, string>;
}

class BadRequest extends Error {}

function parseV2(text: string): SpecializeRequest {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new BadRequest(`specialize request is not valid JSON: ${(err as Error).message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('specialize request must be a JSON object');
  const b = body as Record<string, unknown>;
  if (typeof b.filepath !== 'string' || b.filepath === '') throw new BadRequest('filepath is required');
  if (b.functionName !== undefined && b.functionName !== null && typeof b.functionName !== 'string') {
    throw new BadRequest('functionName must be a string');
  }
  let env: Record<string, string> | undefined;
  if (b.env !== undefined && b.env !== null) {
    if (typeof b.env !== 'object' || Array.isArray(b.env)) throw new BadRequest('env must be an object of strings');
    env = {};
    for (const [k, v] of Object.entries(b.env)) {
      if (typeof v !== 'string') throw new BadRequest(`env.${k} must be a string`);
      if (k === '' || k.includes('=') || k.includes('\0') || v.includes('\0')) throw new BadRequest(`env.${k} is not a valid variable`);
      env[k] = v;
    }
  }
  return { filepath: b.filepath, functionName: (b.functionName as string | null | undefined) ?? undefined, env };
}

/** Nothing was loaded (a bad request, a body too large, a client gone): the worker may be specialized later. */
const NOT_TRIED = Symbol('not tried');
/** Loading ran and failed: the module may have run halfway. */
const FAILED = Symbol('failed');

/**
 * The worker's one-way switch. `handler` is set once a specialization
 * succeeded; `attempted` refuses a second attempt even after a failure,
 * because a half-run module may have left the process in any state.
 */
export class Specializer {
  handler: Handler | undefined;
  #attempted = false;
  readonly #codepath: string;

  constructor(codepath: string) {
    this.#codepath = codepath;
  }

  async handle(req: IncomingMessage, res: ServerResponse, version: 1 | 2): Promise<void> {
    if (this.#attempted) {
      req.resume();
      sendJson(res, 400, { error: 'Not a generic container: this worker has been specialized already' });
      return;
    }
    this.#attempted = true;
    let outcome: Handler | typeof NOT_TRIED | typeof FAILED = NOT_TRIED;
    try {
      outcome = await this.#run(req, res, version, false);
    } finally {
      // Until something is loaded, the worker stays generic.
      if (outcome === NOT_TRIED) this.#attempted = false;
    }
    if (typeof outcome === 'function') this.handler = outcome;
  }

  /**
   * The whole specialization path run on a fixture while the worker is still
   * generic, changing nothing (no handler kept, no chdir, no environment): the
   * first real specialization then runs code that has run before, which on a
   * cold start is milliseconds.
   */
  async rehearse(req: IncomingMessage, res: ServerResponse): Promise<void> {
    await this.#run(req, res, 2, true);
  }

  async #run(req: IncomingMessage, res: ServerResponse, version: 1 | 2, rehearsal: boolean): Promise<Handler | typeof NOT_TRIED | typeof FAILED> {
    // The request path's own reader: warmed while the worker was generic.
    const raw = await readBody(req, res, MAX_SPECIALIZE_BODY);
    // Too large (answered already) or the client went away.
    if (raw === undefined) return NOT_TRIED;
    let spec: SpecializeRequest;
    try {
      spec = version === 2 ? parseV2(raw.toString('utf8')) : { filepath: this.#codepath };
    } catch (err) {
      if (!(err instanceof BadRequest)) throw err;
      sendJson(res, 400, { error: err.message });
      return NOT_TRIED;
    }
    try {
      if (spec.env && !rehearsal) Object.assign(process.env, spec.env);
      // A rehearsal must not move the worker: a real specialization may be under way beside it.
      chdirTo(rehearsal ? process.cwd() : spec.filepath);
      const handler = await loadHandler(spec.filepath, spec.functionName);
      res.statusCode = 200;
      res.setHeader('content-length', 0);
      res.end();
      return handler;
    } catch (err) {
      const status = err instanceof LoadError ? err.status : 500;
      const message = err instanceof Error ? err.message : String(err);
      // The stack of what the user's module threw helps; the loader's own frames do not.
      const thrown = err instanceof LoadError ? err.cause : err;
      const detail = thrown instanceof Error ? (thrown.stack ?? message) : message;
      process.stderr.write(`error specializing function: ${thrown === undefined ? message : `${message}\n${detail}`}\n`);
      sendJson(res, status, { error: `error specializing function: ${message}` });
      return FAILED;
    }
  }
}

/** Relative paths in the user's code, also at load time, resolve next to the code, as in a container. */
function chdirTo(filepath: string): void {
  try {
    process.chdir(filepath);
  } catch {
    try {
      process.chdir(path.dirname(filepath));
    } catch {
      // keep the current directory
    }
  }
}
