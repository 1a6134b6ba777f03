// The one error registry. Every error Flint raises on purpose carries a stable
// `code`; callers match on `err.code`, never on message text. Each code maps to
// one HTTP status (API, router) and one CLI exit code.

export interface ErrorDef {
  readonly status: number;
  readonly exit: number;
}

export const ErrorCodes = {
  FLINT_ERR_VALIDATION: { status: 400, exit: 2 },
  FLINT_ERR_BAD_JSON: { status: 400, exit: 2 },
  FLINT_ERR_BAD_ARCHIVE: { status: 400, exit: 2 },
  FLINT_ERR_UNAUTHORIZED: { status: 401, exit: 3 },
  FLINT_ERR_FORBIDDEN: { status: 403, exit: 3 },
  FLINT_ERR_NOT_FOUND: { status: 404, exit: 4 },
  /** Kubernetes mode: a write went to a namespace the cluster does not have. */
  FLINT_ERR_NAMESPACE_NOT_FOUND: { status: 404, exit: 4 },
  FLINT_ERR_METHOD_NOT_ALLOWED: { status: 405, exit: 2 },
  FLINT_ERR_LONG_POLL_TIMEOUT: { status: 408, exit: 7 },
  FLINT_ERR_REQUEST_TIMEOUT: { status: 408, exit: 1 },
  FLINT_ERR_ALREADY_EXISTS: { status: 409, exit: 5 },
  FLINT_ERR_CONFLICT: { status: 409, exit: 5 },
  FLINT_ERR_IN_USE: { status: 409, exit: 5 },
  FLINT_ERR_GONE: { status: 410, exit: 1 },
  FLINT_ERR_PAYLOAD_TOO_LARGE: { status: 413, exit: 2 },
  FLINT_ERR_UNSUPPORTED_MEDIA_TYPE: { status: 415, exit: 2 },
  FLINT_ERR_EXPECTATION_FAILED: { status: 417, exit: 2 },
  FLINT_ERR_TOO_MANY_REQUESTS: { status: 429, exit: 1 },
  FLINT_ERR_HEADERS_TOO_LARGE: { status: 431, exit: 2 },
  FLINT_ERR_CONFIG: { status: 400, exit: 2 },
  FLINT_ERR_USAGE: { status: 400, exit: 2 },
  FLINT_ERR_INTERNAL: { status: 500, exit: 1 },
  /** A path the server writes or reads is a link, or not its own directory: something planted it. */
  FLINT_ERR_UNSAFE_PATH: { status: 500, exit: 1 },
  FLINT_ERR_FUNCTION_ERROR: { status: 500, exit: 1 },
  FLINT_ERR_SPECIALIZE_FAILED: { status: 500, exit: 1 },
  FLINT_ERR_NOT_IMPLEMENTED: { status: 501, exit: 1 },
  FLINT_ERR_FUNCTION_UNREACHABLE: { status: 502, exit: 1 },
  FLINT_ERR_UNAVAILABLE: { status: 503, exit: 1 },
  FLINT_ERR_NETWORK_UNAVAILABLE: { status: 503, exit: 1 },
  FLINT_ERR_FUNCTION_TIMEOUT: { status: 504, exit: 1 },
  FLINT_ERR_STORAGE_FULL: { status: 507, exit: 1 },
  FLINT_ERR_UNREACHABLE: { status: 503, exit: 6 },
} as const satisfies Record<string, ErrorDef>;

export type ErrorCode = keyof typeof ErrorCodes;

export class FlintError extends Error {
  readonly code: ErrorCode;
  /** Dotted path of the offending field (`spec.poolsize`), when one is to blame. */
  readonly field: string | undefined;
  /** For a refusal that passes (a full queue, a spent budget): seconds the client should wait, sent as `Retry-After`. */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options?: { field?: string; cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'FlintError';
    this.code = code;
    this.field = options?.field;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }

  get status(): number {
    return ErrorCodes[this.code].status;
  }

  get exitCode(): number {
    return ErrorCodes[this.code].exit;
  }

  toJSON(): { code: ErrorCode; message: string; field?: string } {
    return this.field === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, field: this.field };
  }
}

export function isFlintError(err: unknown): err is FlintError {
  return err instanceof FlintError;
}

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ErrorCodes, code);
}

/** Builds an error from an API error body, so the CLI sees the server's code. */
export function errorFromBody(body: unknown, fallbackStatus: number): FlintError {
  if (body && typeof body === 'object') {
    const b = body as { code?: unknown; message?: unknown; field?: unknown };
    if (isErrorCode(b.code) && typeof b.message === 'string') {
      return new FlintError(b.code, b.message, typeof b.field === 'string' ? { field: b.field } : undefined);
    }
  }
  const code = (Object.keys(ErrorCodes) as ErrorCode[]).find((c) => ErrorCodes[c].status === fallbackStatus);
  return new FlintError(code ?? 'FLINT_ERR_INTERNAL', `server answered ${fallbackStatus}`);
}

// Short constructors for the errors raised most often.
export const notFound = (what: string, field?: string) =>
  new FlintError('FLINT_ERR_NOT_FOUND', `${what} not found`, field ? { field } : undefined);
export const invalid = (field: string, message: string) =>
  new FlintError('FLINT_ERR_VALIDATION', `${field}: ${message}`, { field });
