import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { Archive, Package } from '../../api/kinds.ts';
import { buildCommandProblem } from '../../api/build-command.ts';
import { checkName, collect, kubifyName, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { createOrSave, SpecOutput, type SpecOutputFlags, withSpecOutput } from '../spec/output.ts';
import { type ListOutputFlags, outputOption, printList, printObject, table, withListOutput } from '../output.ts';

interface PkgFlags {
  name?: string;
  env?: string;
  code?: string;
  deploy?: string[];
  src?: string[];
  srcchecksum?: string;
  deploychecksum?: string;
  buildcmd?: string;
  force?: boolean;
}

// Loaded when a command has archives to make or read: zip handling is most of the CLI's code.
const archiveInput = () => import('../archive-input.ts');

type ArchiveMaker = (flag: '--src' | '--deploy' | '--code', inputs: string[], opts: { checksum?: string; checksumFlag?: string; keepAsIs?: boolean }) => Archive | Promise<Archive>;

/**
 * The archives the flags describe, for a new package or an update: made by
 * `make`, which by default embeds or uploads them (with --spec it names
 * ArchiveUploadSpecs instead).
 */
export async function archivesFromFlags(
  c: Ctx,
  f: Pick<PkgFlags, 'code' | 'deploy' | 'src' | 'srcchecksum' | 'deploychecksum'>,
  make: ArchiveMaker = async (flag, inputs, opts) => (await archiveInput()).archiveFrom(c, flag, inputs, opts),
): Promise<Pick<Package['spec'], 'source' | 'deployment'>> {
  if (f.code && f.deploy) throw usage('use either --code or --deploy, not both');
  const out: Pick<Package['spec'], 'source' | 'deployment'> = {};
  if (f.src) out.source = await make('--src', f.src, { checksum: f.srcchecksum, checksumFlag: '--srcchecksum' });
  else if (f.srcchecksum) throw usage('--srcchecksum needs --src');
  if (f.deploy) out.deployment = await make('--deploy', f.deploy, { checksum: f.deploychecksum, checksumFlag: '--deploychecksum' });
  else if (f.deploychecksum) throw usage('--deploychecksum needs --deploy');
  if (f.code) out.deployment = await make('--code', [f.code], { keepAsIs: true });
  return out;
}

/** With --spec or --dry: a package's archives as ArchiveUploadSpecs named `<package>-src|deploy|code`. */
export function specArchiveMaker(out: SpecOutput, pkgName: string): ArchiveMaker {
  return (flag, inputs, opts) => out.archive(flag, inputs, `${pkgName}-${flag.slice(2)}`, opts.checksum);
}

function checkBuildcmd(cmd: string | undefined): string | undefined {
  if (cmd === undefined) return undefined;
  const problem = buildCommandProblem(cmd);
  if (problem) throw usage(`--buildcmd ${problem}`);
  return cmd;
}

function suffix(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  return [...randomBytes(4)].map((b) => alphabet[b % alphabet.length]).join('');
}

/** `hello.zip` -> `hello-zip-k3x9`, as Fission names packages. */
export function packageNameFor(file: string): string {
  return kubifyName(`${path.basename(file)}-${suffix()}`);
}

export function registerPkg(pkg: Command, ctx: () => Ctx): void {

  const pkgCreate = pkg
    .command('create')
    .description('Create a package')
    .option('--name <name>', 'package name (default: <file>-<4 random characters>)')
    .requiredOption('--env <name>', 'environment the package is for')
    .option('--code <file>', 'a single source file, kept as is')
    .option('--deployarchive, --deploy <file|dir|url>', 'ready-to-run code: a zip, a directory or files (zipped), or a URL (repeatable)', collect)
    .option('--sourcearchive, --src <file|dir|url>', 'source the environment builder builds: a zip, a directory or files, or a URL (repeatable)', collect)
    .option('--srcchecksum <sha256>', 'expected sha256 of the source archive')
    .option('--deploychecksum <sha256>', 'expected sha256 of the deploy archive')
    .option('--buildcmd <command>', "build command (default: the environment builder's)");
  withSpecOutput(pkgCreate).action(async (f: PkgFlags & SpecOutputFlags) => {
    const c = ctx();
    checkName('--env', f.env as string);
    if (!f.code && !f.deploy && !f.src) throw usage('need one of --code, --deploy or --src');
    const first = f.src?.[0] ?? f.deploy?.[0] ?? (f.code as string);
    const name = f.name ? checkName('--name', f.name) : packageNameFor(first.replace(/[?#].*$/, '').replace(/\/+$/, ''));
    const out = SpecOutput.from(c, f);
    const archives = await archivesFromFlags(c, f, out ? specArchiveMaker(out, name) : undefined);
    const spec: Package['spec'] = { environment: { name: f.env as string, namespace: c.namespace }, ...archives };
    const buildcmd = checkBuildcmd(f.buildcmd);
    if (buildcmd) spec.buildcmd = buildcmd;
    await createOrSave(c, out, { kind: 'Package', metadata: { name, namespace: c.namespace }, spec }, `package-${name}`, `Package '${name}' created\n`);
  });

  pkg
    .command('update')
    .description("Update a package's code (a new source is built again)")
    .requiredOption('--name <name>', 'package name')
    .option('--env <name>', 'environment')
    .option('--code <file>', 'a single source file')
    .option('--deployarchive, --deploy <file|dir|url>', 'ready-to-run code (repeatable)', collect)
    .option('--sourcearchive, --src <file|dir|url>', 'source to be built (repeatable)', collect)
    .option('--srcchecksum <sha256>', 'expected sha256 of the source archive')
    .option('--deploychecksum <sha256>', 'expected sha256 of the deploy archive')
    .option('--buildcmd <command>', 'build command')
    .action(async (f: PkgFlags) => {
      const c = ctx();
      const cur = await c.client().get('Package', c.namespace, checkName('--name', f.name as string));
      if (f.env) cur.spec.environment = { name: checkName('--env', f.env), namespace: c.namespace };
      Object.assign(cur.spec, await archivesFromFlags(c, f));
      const buildcmd = checkBuildcmd(f.buildcmd);
      if (buildcmd) cur.spec.buildcmd = buildcmd;
      await c.client().update(cur);
      c.io.out(`Package '${f.name}' updated\n`);
    });

  pkg
    .command('rebuild')
    .description('Build a failed package again')
    .requiredOption('--name <name>', 'package name')
    .action(async (f: { name: string }) => {
      const c = ctx();
      const name = checkName('--name', f.name);
      await c.client().json('POST', `/v1/namespaces/${encodeURIComponent(c.namespace)}/packages/${encodeURIComponent(name)}/rebuild`);
      c.io.out(`Retrying build for pkg ${name}. Use "flint pkg info --name ${name}" to view status.\n`);
    });

  pkg
    .command('info')
    .description("Show a package's status and build log")
    .requiredOption('--name <name>', 'package name')
    .addOption(outputOption('json or yaml: the package object instead of the summary', null))
    .action(async (f: { name: string; output?: string }) => {
      const c = ctx();
      const p = await c.client().get('Package', c.namespace, checkName('--name', f.name));
      if (f.output !== undefined) {
        await printObject(c.io, p, f.output);
        return;
      }
      table(c.io, ['Name:', p.metadata.name], [
        ['Environment:', p.spec.environment.name],
        ['Status:', p.status?.buildstatus ?? 'none'],
        ['Build Logs:', ''],
      ]);
      const log = (p.status?.buildlog ?? '').replace(/\\n/g, '\n');
      if (log) c.io.out(log.endsWith('\n') ? log : `${log}\n`);
    });

  withListOutput(pkg.command('list').description('List packages').option('-A, --all-namespaces', 'every namespace')).action(
    async (f: { allNamespaces?: boolean } & ListOutputFlags) => {
      const c = ctx();
      const items = await c.client().list('Package', f.allNamespaces ? undefined : c.namespace);
      await printList(c.io, items, f, {
        header: ['NAME', 'BUILD_STATUS', 'ENV', 'LASTUPDATEDAT', 'NAMESPACE'],
        row: (p) => [p.metadata.name, p.status?.buildstatus ?? 'none', p.spec.environment.name, p.status?.lastUpdateTimestamp ?? p.metadata.creationTimestamp, p.metadata.namespace],
      });
    },
  );

  pkg
    .command('delete')
    .description('Delete a package')
    .requiredOption('--name <name>', 'package name')
    .option('-f, --force', 'delete even if functions use it')
    .action(async (f: { name: string; force?: boolean }) => {
      const c = ctx();
      await c.client().delete('Package', c.namespace, checkName('--name', f.name), f.force);
      c.io.out(`Package '${f.name}' deleted\n`);
    });

  for (const which of ['getsrc', 'getdeploy'] as const) {
    pkg
      .command(which)
      .description(which === 'getsrc' ? "Write a package's source archive" : "Write a package's deploy archive")
      .requiredOption('--name <name>', 'package name')
      .option('-o, --output <file>', 'write to this file instead of standard output')
      .action(async (f: { name: string; output?: string }) => {
        const c = ctx();
        const p = await c.client().get('Package', c.namespace, checkName('--name', f.name));
        const a = which === 'getsrc' ? p.spec.source : p.spec.deployment;
        if (!a) throw usage(`package '${f.name}' has no ${which === 'getsrc' ? 'source' : 'deploy'} archive`);
        const bytes = await (await archiveInput()).archiveBytes(c, a);
        if (f.output) fs.writeFileSync(path.resolve(c.io.cwd, f.output), bytes);
        else c.io.out(bytes);
      });
  }
}
