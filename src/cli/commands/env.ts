import type { Command } from 'commander';
import type { Environment } from '../../api/kinds.ts';
import { checkName, collect, cpuQuantity, intFlag, kvMap, memoryQuantity } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { createOrSave, SpecOutput, type SpecOutputFlags, withSpecOutput } from '../spec/output.ts';
import { type ListOutputFlags, outputOption, printList, printObject, withListOutput } from '../output.ts';

interface EnvFlags {
  name: string;
  image?: string;
  builder?: string;
  buildcmd?: string;
  poolsize?: number;
  version?: number;
  mincpu?: number;
  maxcpu?: number;
  minmemory?: number;
  maxmemory?: number;
  graceperiod?: number;
  keeparchive?: boolean;
  externalnetwork?: boolean;
  labels?: string[];
  runtimeEnv?: string[];
}

function addSpecFlags(cmd: Command): Command {
  return cmd
    .option('--builder <image>', 'builder image, for packages built from source')
    .option('--buildcmd <command>', "the builder's build command (default 'build' with --builder)")
    .option('--poolsize <n>', 'warm generic workers kept ready', intFlag('--poolsize', 0, 1000))
    .option('--version <n>', 'runtime interface version, 1-3', intFlag('--version', 1, 3))
    .option('--mincpu <millicores>', 'CPU request per worker', intFlag('--mincpu', 1))
    .option('--maxcpu <millicores>', 'CPU limit per worker', intFlag('--maxcpu', 1))
    .option('--minmemory <MiB>', 'memory request per worker', intFlag('--minmemory', 1))
    .option('--maxmemory <MiB>', 'memory limit per worker', intFlag('--maxmemory', 1))
    .option('--graceperiod <seconds>', 'grace period before a worker is killed', intFlag('--graceperiod', 0, 86400))
    .option('--keeparchive', 'keep the deploy archive as a file instead of unpacking it')
    .option('--externalnetwork', "let this environment's functions reach the network")
    .option('--runtime-env <KEY=VALUE>', 'environment variable for every worker (repeatable)', collect)
    .option('--labels <k=v,...>', 'labels, comma separated', (v: string, prev: string[] = []) => [...prev, ...v.split(',')]);
}

function applyFlags(spec: Environment['spec'], f: EnvFlags): void {
  if (f.image) spec.runtime.image = f.image;
  const runtimeEnv = kvMap('--runtime-env', f.runtimeEnv, { allowEqualsInValue: true });
  if (runtimeEnv) spec.runtime.env = runtimeEnv;
  if (f.builder || f.buildcmd) {
    spec.builder = { ...spec.builder };
    if (f.builder) spec.builder.image = f.builder;
    spec.builder.command = f.buildcmd ?? spec.builder.command ?? 'build';
  }
  if (f.poolsize !== undefined) spec.poolsize = f.poolsize;
  if (f.version !== undefined) spec.version = f.version;
  const requests = { cpu: cpuQuantity('--mincpu', f.mincpu), memory: memoryQuantity('--minmemory', f.minmemory) };
  const limits = { cpu: cpuQuantity('--maxcpu', f.maxcpu), memory: memoryQuantity('--maxmemory', f.maxmemory) };
  const clean = (o: Record<string, string | undefined>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
  if (Object.values(requests).some(Boolean) || Object.values(limits).some(Boolean)) {
    spec.resources = {
      requests: { ...spec.resources?.requests, ...clean(requests) },
      limits: { ...spec.resources?.limits, ...clean(limits) },
    };
  }
  if (f.graceperiod !== undefined) spec.terminationGracePeriod = f.graceperiod;
  if (f.keeparchive) spec.keeparchive = true;
  if (f.externalnetwork) spec.allowAccessToExternalNetwork = true;
}

export function registerEnv(env: Command, ctx: () => Ctx): void {

  withSpecOutput(
    addSpecFlags(
      env
        .command('create')
        .description('Create an environment')
        .requiredOption('--name <name>', 'environment name')
        .requiredOption('--image <image>', 'runtime image, e.g. flint/node-env'),
    ),
  ).action(async (f: EnvFlags & SpecOutputFlags) => {
    const c = ctx();
    checkName('--name', f.name);
    const spec: Environment['spec'] = { runtime: { image: f.image as string } };
    applyFlags(spec, f);
    const obj = { kind: 'Environment' as const, metadata: { name: f.name, namespace: c.namespace, labels: kvMap('--labels', f.labels) }, spec };
    const out = SpecOutput.from(c, f);
    if (!out && f.poolsize === undefined) c.io.out("poolsize not set: the install's executor.poolSize applies (3 unless changed)\n");
    await createOrSave(c, out, obj, `environment-${f.name}`, `environment '${f.name}' created\n`);
  });

  addSpecFlags(
    env.command('update').description('Update an environment').requiredOption('--name <name>', 'environment name').option('--image <image>', 'runtime image'),
  ).action(async (f: EnvFlags) => {
    const c = ctx();
    checkName('--name', f.name);
    const cur = await c.client().get('Environment', c.namespace, f.name);
    applyFlags(cur.spec, f);
    const labels = kvMap('--labels', f.labels);
    if (labels) cur.metadata.labels = labels;
    await c.client().update(cur);
    c.io.out(`environment '${f.name}' updated\n`);
  });

  env
    .command('get')
    .description('Show an environment')
    .requiredOption('--name <name>', 'environment name')
    .addOption(outputOption())
    .action(async (f: { name: string; output: string }) => {
      const c = ctx();
      await printObject(c.io, await c.client().get('Environment', c.namespace, checkName('--name', f.name)), f.output);
    });

  withListOutput(env.command('list').description('List environments').option('-A, --all-namespaces', 'every namespace')).action(
    async (f: { allNamespaces?: boolean } & ListOutputFlags) => {
      const c = ctx();
      const items = await c.client().list('Environment', f.allNamespaces ? undefined : c.namespace);
      await printList(c.io, items, f, {
        header: ['NAME', 'IMAGE', 'BUILDER_IMAGE', 'POOLSIZE', 'MINCPU', 'MAXCPU', 'MINMEMORY', 'MAXMEMORY', 'EXTNET', 'GRACETIME', 'NAMESPACE'],
        row: (e) => [
          e.metadata.name,
          e.spec.runtime.image,
          e.spec.builder?.image,
          e.spec.poolsize ?? 'default',
          String(e.spec.resources?.requests?.cpu ?? 0),
          String(e.spec.resources?.limits?.cpu ?? 0),
          String(e.spec.resources?.requests?.memory ?? 0),
          String(e.spec.resources?.limits?.memory ?? 0),
          e.spec.allowAccessToExternalNetwork === true,
          e.spec.terminationGracePeriod,
          e.metadata.namespace,
        ],
      });
    },
  );

  env
    .command('delete')
    .description('Delete an environment')
    .requiredOption('--name <name>', 'environment name')
    .option('-f, --force', 'delete even if functions use it')
    .option('--ignorenotfound', 'succeed when it does not exist')
    .action(async (f: { name: string; force?: boolean; ignorenotfound?: boolean }) => {
      const c = ctx();
      checkName('--name', f.name);
      try {
        await c.client().delete('Environment', c.namespace, f.name, f.force);
      } catch (err) {
        if (f.ignorenotfound && (err as { code?: string }).code === 'FLINT_ERR_NOT_FOUND') return;
        throw err;
      }
      c.io.out(`environment '${f.name}' deleted\n`);
    });
}
