// The body of `POST /specialize` to a pool pod's fetcher, as Fission's
// executor sends it ({FetchReq, LoadReq}, those two keys capitalized), with
// Flint's additions: a literal archive inline, the checksum to verify, the
// Authorization to download with, and the data of the function's Secrets and
// ConfigMaps. Checked here once, so the fetcher works only on a valid request.

export interface FetchRequest {
  /** 1: the deployment archive (the only kind Flint's executor sends; 0 and 2 are Fission's source and URL fetches). */
  fetchType: number;
  /** Where to download the archive from (the control plane's /v1/archives/<sha256>). */
  url?: string;
  /** base64 of the archive, for one small enough to live inside its package. */
  literal?: string;
  /** sha256 the archive must have. */
  checksum?: string;
  /** Sent as the download's Authorization header. */
  authorization?: string;
  /** Name under the userfunc directory: `deployarchive`. */
  filename: string;
  /** Keep a zip as it is instead of unpacking it. */
  keeparchive?: boolean;
  /** `<namespace>/<name>` -> key -> value: written as <secrets>/<namespace>/<name>/<key>. */
  secrets?: Record<string, Record<string, string>>;
  configmaps?: Record<string, Record<string, string>>;
}

export interface LoadRequest {
  /** Passed to the environment: where the code is, as the environment container sees it. */
  filepath: string;
  functionName?: string;
  envVersion?: number;
  FunctionMetadata?: Record<string, unknown>;
  env?: Record<string, string>;
}

export interface SpecializeRequest {
  FetchReq: FetchRequest;
  LoadReq: LoadRequest;
}

export class BadSpecializeRequest extends Error {}

const FILENAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const DATA_REF = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const DATA_KEY = /^[-._a-zA-Z0-9]+$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function optionalString(o: Record<string, unknown>, key: string, at: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new BadSpecializeRequest(`${at}.${key} must be a string`);
  return v;
}

function dataMap(v: unknown, at: string): Record<string, Record<string, string>> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw new BadSpecializeRequest(`${at} must be an object`);
  const out: Record<string, Record<string, string>> = {};
  for (const [ref, data] of Object.entries(v)) {
    if (!DATA_REF.test(ref)) throw new BadSpecializeRequest(`${at}: '${ref}' is not <namespace>/<name>`);
    if (!isObject(data)) throw new BadSpecializeRequest(`${at}.${ref} must be an object of strings`);
    out[ref] = {};
    for (const [key, value] of Object.entries(data)) {
      // A key is a file name: nothing that could leave the object's directory.
      if (!DATA_KEY.test(key) || key === '.' || key === '..') throw new BadSpecializeRequest(`${at}.${ref}: key '${key}' is not a valid file name`);
      if (typeof value !== 'string') throw new BadSpecializeRequest(`${at}.${ref}.${key} must be a string`);
      out[ref][key] = value;
    }
  }
  return out;
}

export function parseSpecializeRequest(body: unknown): SpecializeRequest {
  if (!isObject(body)) throw new BadSpecializeRequest('the body must be a JSON object {FetchReq, LoadReq}');
  const f = body.FetchReq;
  const l = body.LoadReq;
  if (!isObject(f)) throw new BadSpecializeRequest('FetchReq must be an object');
  if (!isObject(l)) throw new BadSpecializeRequest('LoadReq must be an object');
  if (f.fetchType !== 1) throw new BadSpecializeRequest(`FetchReq.fetchType ${JSON.stringify(f.fetchType)} is not supported: Flint's fetcher takes deployment archives (1)`);
  const filename = optionalString(f, 'filename', 'FetchReq') ?? 'deployarchive';
  if (!FILENAME.test(filename)) throw new BadSpecializeRequest(`FetchReq.filename '${filename}' is not a plain file name`);
  const url = optionalString(f, 'url', 'FetchReq');
  const literal = optionalString(f, 'literal', 'FetchReq');
  if ((url === undefined) === (literal === undefined)) throw new BadSpecializeRequest('FetchReq needs exactly one of url and literal');
  if (url !== undefined && !/^https?:\/\//.test(url)) throw new BadSpecializeRequest(`FetchReq.url '${url}' is not an http(s) URL`);
  const checksum = optionalString(f, 'checksum', 'FetchReq');
  if (checksum !== undefined && !/^[0-9a-f]{64}$/.test(checksum)) throw new BadSpecializeRequest('FetchReq.checksum must be 64 hex digits (sha256)');
  if (f.keeparchive !== undefined && typeof f.keeparchive !== 'boolean') throw new BadSpecializeRequest('FetchReq.keeparchive must be a boolean');
  const filepath = optionalString(l, 'filepath', 'LoadReq');
  if (filepath === undefined) throw new BadSpecializeRequest('LoadReq.filepath is required');
  if (l.envVersion !== undefined && !(Number.isInteger(l.envVersion) && (l.envVersion as number) >= 1 && (l.envVersion as number) <= 3)) {
    throw new BadSpecializeRequest('LoadReq.envVersion must be 1, 2 or 3');
  }
  if (l.FunctionMetadata !== undefined && l.FunctionMetadata !== null && !isObject(l.FunctionMetadata)) throw new BadSpecializeRequest('LoadReq.FunctionMetadata must be an object');
  let env: Record<string, string> | undefined;
  if (l.env !== undefined && l.env !== null) {
    if (!isObject(l.env) || Object.values(l.env).some((v) => typeof v !== 'string')) throw new BadSpecializeRequest('LoadReq.env must be an object of strings');
    env = l.env as Record<string, string>;
  }
  return {
    FetchReq: {
      fetchType: 1,
      url,
      literal,
      checksum,
      authorization: optionalString(f, 'authorization', 'FetchReq'),
      filename,
      keeparchive: f.keeparchive === true,
      secrets: dataMap(f.secrets, 'FetchReq.secrets'),
      configmaps: dataMap(f.configmaps, 'FetchReq.configmaps'),
    },
    LoadReq: {
      filepath,
      functionName: optionalString(l, 'functionName', 'LoadReq'),
      envVersion: l.envVersion as number | undefined,
      FunctionMetadata: (l.FunctionMetadata as Record<string, unknown> | undefined) ?? undefined,
      env,
    },
  };
}
