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
    // The request path's own reader: warmed while the worker was generic.
    const raw = await readBody(req, res, MAX_SPECIALIZE_BODY);
    // Until something is loaded, the worker stays generic.
    if (raw === undefined) {
      // Too large (answered already) or the client went away.
      this.#attempted = false;
      return;
    }
    let spec: SpecializeRequest;
    try {
      spec = version === 2 ? parseV2(raw.toString('utf8')) : { filepath: this.#codepath };
    } catch (err) {
      this.#attempted = false;
      if (!(err instanceof BadRequest)) throw err;
      sendJson(res, 400, { error: err.message });
      return;
    }
    try {
      if (spec.env) Object.assign(process.env, spec.env);
      chdirTo(spec.filepath);
      this.handler = await loadHandler(spec.filepath, spec.functionName);
      res.statusCode = 200;
      res.setHeader('content-length', 0);
      res.end();
    } catch (err) {
      const status = err instanceof LoadError ? err.status : 500;
      const message = err instanceof Error ? err.message : String(err);
      // The stack of what the user's module threw helps; the loader's own frames do not.
      const thrown = err instanceof LoadError ? err.cause : err;
      const detail = thrown instanceof Error ? (thrown.stack ?? message) : message;
      process.stderr.write(`error specializing function: ${thrown === undefined ? message : `${message}\n${detail}`}\n`);
      sendJson(res, status, { error: `error specializing function: ${message}` });
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
