// What a command may touch of the outside world: injected so tests can run
// `main()` in process and read what it printed.
import { controllerUnauthorizedHint, resolveControllerToken } from '../auth/client.ts';
import { ApiClient, DEFAULT_URL } from './client.ts';

export interface Io {
  /** Bytes too: `package getdeploy` writes an archive to standard output. */
  out(text: string | Uint8Array): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

export function processIo(): Io {
  return {
    out: (t) => process.stdout.write(t),
    err: (t) => process.stderr.write(t),
    env: process.env,
    cwd: process.cwd(),
  };
}

export interface Ctx {
  io: Io;
  namespace: string;
  client(): ApiClient;
  warn(message: string): void;
}

export function makeCtx(io: Io, namespace: string | undefined): Ctx {
  let client: ApiClient | undefined;
  const warn = (m: string) => io.out(`Warning: ${m}\n`);
  return {
    io,
    namespace: namespace ?? io.env.FLINT_NAMESPACE ?? 'default',
    warn,
    client() {
      const credentials = resolveControllerToken(io.env);
      client ??= new ApiClient({
        baseUrl: io.env.FLINT_URL || DEFAULT_URL,
        token: credentials?.token,
        login: credentials?.login,
        unauthorizedHint: controllerUnauthorizedHint(credentials, io.env),
        onWarning: warn,
      });
      return client;
    },
  };
}
