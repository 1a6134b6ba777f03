// Where the worker listens and where it finds code, from argv and env.
// The worker is launched by Flint's executor (Unix socket, local mode) or as a
// container's command (TCP port, kubernetes mode), so both spellings exist.

export interface RuntimeOptions {
  /** Unix socket path; when set, `port` is not used. */
  socket?: string;
  port: number;
  host: string;
  /** v1 specialize loads this file (Fission's `--codepath`). */
  codepath: string;
  /** Largest request body the worker reads; larger ones get 413. */
  maxBodyBytes: number;
  /** Log one line per request (off on the hot path otherwise). */
  debug: boolean;
  /** Exit when stdin closes: the parent died (unsandboxed workers have no other death signal). */
  exitOnStdinEof: boolean;
  /**
   * Warm the module loaders and the request path before listening (default).
   * Off (FLINT_WARM_UP=0) for a worker started because a request is waiting
   * for it: that request pays for what it uses anyway, and warm-up's extra
   * (the ES module loader, the HTTP client of its self-call) is a quarter of
   * such a worker's start-up CPU, in a burst of cold starts the wait.
   */
  warmUp: boolean;
}

const DEFAULT_MAX_BODY = 50 * 1024 * 1024;

function flag(argv: readonly string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === `--${name}`) return argv[i + 1];
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return undefined;
}

function positiveInt(text: string | undefined, what: string, fallback: number): number {
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${what} must be a positive integer, got '${text}'`);
  return n;
}

export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv): RuntimeOptions {
  const userfunc = env.FLINT_USERFUNC_DIR || '/userfunc';
  const portFlag = flag(argv, 'port');
  // A flag beats the environment; between two of a kind the socket wins.
  const socket = flag(argv, 'socket') ?? (portFlag === undefined ? env.FLINT_SOCKET || undefined : undefined);
  return {
    socket,
    port: positiveInt(portFlag ?? env.FLINT_PORT, 'port', 8888),
    host: flag(argv, 'host') ?? env.FLINT_HOST ?? '0.0.0.0',
    codepath: flag(argv, 'codepath') ?? `${userfunc.replace(/\/+$/, '')}/user`,
    maxBodyBytes: positiveInt(env.FLINT_MAX_BODY_BYTES, 'FLINT_MAX_BODY_BYTES', DEFAULT_MAX_BODY),
    debug: env.FLINT_DEBUG !== undefined && env.FLINT_DEBUG !== '' && env.FLINT_DEBUG !== '0',
    exitOnStdinEof: env.FLINT_EXIT_ON_STDIN_EOF === '1',
    warmUp: env.FLINT_WARM_UP !== '0',
  };
}
