// The `flint` command tree. Built by a function so the CLI reference can be
// generated from the very same definitions.
import { Command } from 'commander';
import { registerData } from './commands/data.ts';
import { registerEnv } from './commands/env.ts';
import { registerFn } from './commands/fn.ts';
import { registerMqt } from './commands/mqt.ts';
import { registerPkg } from './commands/pkg.ts';
import { registerRoute } from './commands/route.ts';
import { registerSpec } from './commands/spec.ts';
import { registerToken } from './commands/token.ts';
import { registerTopic } from './commands/topic.ts';
import { collect, intFlag } from './flags.ts';
import { type Ctx, type Io, makeCtx } from './io.ts';

export function buildProgram(io: Io): Command {
  const program = new Command('flint')
    .description('Flint: functions as a service. FLINT_URL points at the control plane (default http://127.0.0.1:8888).')
    .option('-n, --namespace <namespace>', 'namespace of the resources (default: FLINT_NAMESPACE or "default")')
    .showHelpAfterError(false)
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) });
  const ctx = (): Ctx => makeCtx(io, program.opts().namespace);

  program
    .command('server')
    .description('Start the platform on this machine (controller, router, executor, ingress)')
    .option('-f, --values <file>', 'install values file (repeatable)', collect)
    .option('--set <key=value>', 'set one install value (repeatable)', collect)
    .action(async (f: { values?: string[]; set?: string[] }) => {
      const { runServer } = await import('../server/main.ts');
      await runServer({ files: f.values ?? [], sets: f.set ?? [] });
    });
  program
    .command('fetcher')
    .description("Serve a kubernetes-mode pool pod's fetcher: the sidecar that loads one function into the pod (with FLINT_FETCHER_TOKEN set, only a specialize request carrying it as a bearer token)")
    .option('--host <host>', 'address to listen on (default: FLINT_HOST, else 0.0.0.0)')
    .option('--port <port>', 'port to listen on', intFlag('--port', 1, 65535), 8000)
    .option('--userfunc <dir>', 'the volume shared with the environment container', '/userfunc')
    .option('--secrets <dir>', "where the function's Secrets are written, as <namespace>/<name>/<key>", '/secrets')
    .option('--configs <dir>', "where the function's ConfigMaps are written, as <namespace>/<name>/<key>", '/configs')
    .option('--env-url <url>', 'the environment container, from inside the pod (default: FLINT_ENV_URL, else port 8888 of the pod\'s own address: FLINT_HOST, else 127.0.0.1)')
    .action(async (f: { host?: string; port: number; userfunc: string; secrets: string; configs: string; envUrl?: string }) => {
      const { startFetcher } = await import('../fetcher/server.ts');
      const fetcher = await startFetcher({
        host: f.host ?? (process.env.FLINT_HOST || '0.0.0.0'),
        port: f.port,
        userfuncDir: f.userfunc,
        secretsDir: f.secrets,
        configsDir: f.configs,
        // A pod's containers share its address: 127.0.0.1 in a cluster, or the address they all listen on where pods
        // share a host's network (the local node agent).
        envUrl: f.envUrl ?? (process.env.FLINT_ENV_URL || `http://${process.env.FLINT_HOST || '127.0.0.1'}:8888`),
        // From the environment, not a flag: a process's arguments are readable by every user of the machine.
        token: process.env.FLINT_FETCHER_TOKEN || undefined,
      });
      io.out(`fetcher listening on ${fetcher.url}\n`);
      await new Promise<void>((resolve) => {
        for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void fetcher.close().then(resolve));
      });
    });
  registerToken(program, ctx);
  registerEnv(program, ctx);
  registerPkg(program, ctx);
  registerFn(program, ctx);
  registerRoute(program, ctx);
  registerMqt(program, ctx);
  registerData(program, ctx);
  registerTopic(program, ctx);
  registerSpec(program, ctx);
  program
    .command('version')
    .description('Print the client and server versions')
    .action(async () => {
      const { VERSION } = await import('../server/version.ts');
      io.out(`client: ${VERSION}\n`);
      try {
        const info = await ctx().client().json<{ version: string }>('GET', '/v1/info');
        io.out(`server: ${info.version}\n`);
      } catch {
        io.out('server: unreachable\n');
      }
    });
  // Every subcommand reports usage errors the same one-line way.
  const quiet = (cmd: Command) => {
    cmd.exitOverride();
    cmd.configureOutput({ writeOut: (s) => io.out(s), writeErr: () => {} });
    for (const sub of cmd.commands) quiet(sub);
  };
  quiet(program);
  return program;
}
