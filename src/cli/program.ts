// The `flint` command tree. Built by a function so the CLI reference and
// the shell completion are generated from the very same definitions.
//
// A command group's definitions are loaded and built only when the command
// line names the group: `flint fn list` builds the function commands and
// only a name and a description for the others, which is all the top-level
// help shows of them. Building every group costs more than the rest of a
// `flint fn list` together.
import { Argument, Command } from 'commander';
import { collect, intFlag } from './flags.ts';
import { type Ctx, type Io, makeCtx } from './io.ts';

type Register = (group: Command, ctx: () => Ctx) => void;

interface Group {
  name: string;
  aliases?: string[];
  description: string;
  load(): Promise<Register>;
}

const GROUPS: Group[] = [
  { name: 'token', description: 'Authentication tokens', load: async () => (await import('./commands/token.ts')).registerToken },
  { name: 'environment', aliases: ['env'], description: 'Environments: the runtimes functions run in', load: async () => (await import('./commands/env.ts')).registerEnv },
  { name: 'package', aliases: ['pkg'], description: 'Packages: the code of functions, as files or archives', load: async () => (await import('./commands/pkg.ts')).registerPkg },
  { name: 'function', aliases: ['fn'], description: 'Functions: code that runs when a trigger fires', load: async () => (await import('./commands/fn.ts')).registerFn },
  {
    name: 'archive',
    aliases: ['ar'],
    description: "Archives: the control plane's store of uploaded code, by sha256",
    load: async () => (await import('./commands/archive.ts')).registerArchive,
  },
  {
    name: 'route',
    aliases: ['httptrigger', 'ht'],
    description: 'Routes (HTTP triggers): call a function over HTTP',
    load: async () => (await import('./commands/route.ts')).registerRoute,
  },
  {
    name: 'mqt',
    aliases: ['mqtrigger'],
    description: 'Message-queue triggers: call a function for each message on a topic',
    load: async () => (await import('./commands/mqt.ts')).registerMqt,
  },
  {
    name: 'tt',
    aliases: ['timetrigger', 'timer'],
    description: 'Time triggers: call a function on a cron schedule',
    load: async () => (await import('./commands/tt.ts')).registerTt,
  },
  {
    name: 'canary',
    aliases: ['canary-config'],
    description: "Canary configs: move a route's traffic to a new function step by step, back to the old one if it fails",
    load: async () => (await import('./commands/canary.ts')).registerCanary,
  },
  { name: 'secret', description: 'Secrets: confidential key/value data for functions', load: async () => (await import('./commands/data.ts')).registerSecret },
  { name: 'configmap', description: 'ConfigMaps: key/value settings for functions', load: async () => (await import('./commands/data.ts')).registerConfigMap },
  { name: 'topic', description: 'Message-queue topics (Kafka): produce and read messages', load: async () => (await import('./commands/topic.ts')).registerTopic },
  {
    name: 'spec',
    description: 'Spec files: resources declared in a directory (Flint or Fission YAML), applied together',
    load: async () => (await import('./commands/spec.ts')).registerSpec,
  },
];

/**
 * The command tree; with `argv`, only the groups it names are built in
 * full (any word of it that is a group's name or alias: a namespace called
 * `fn` costs a group built for nothing, never a command missing).
 */
export async function buildProgram(io: Io, argv?: readonly string[]): Promise<Command> {
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
  for (const g of GROUPS) {
    const group = program
      .command(g.name)
      .aliases(g.aliases ?? [])
      .description(g.description);
    if (argv === undefined || argv.some((a) => a === g.name || g.aliases?.includes(a))) (await g.load())(group, ctx);
  }
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
  program
    .command('completion')
    .description('Print shell completion for every command and flag: source <(flint completion bash), source <(flint completion zsh), flint completion fish | source')
    .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(['bash', 'zsh', 'fish']))
    .action(async (shell: 'bash' | 'zsh' | 'fish') => {
      const { completionScript } = await import('./completion.ts');
      io.out(completionScript(await buildProgram(io), shell));
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
