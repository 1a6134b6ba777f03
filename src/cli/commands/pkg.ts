import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { type Command, Option } from 'commander';
import type { Archive, Package } from '../../api/kinds.ts';
import { buildCommandProblem } from '../../api/build-command.ts';
import { functionUses } from '../../api/conflicts.ts';
import { BUILD_STATUSES } from '../../api/names.ts';
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

/** The packages of `pkgs` no function uses (functions of every namespace: a function may use another namespace's package). */
async function orphans(c: Ctx, pkgs: Package[]): Promise<Package[]> {
  if (pkgs.length === 0) return pkgs;
  const fns = await c.client().list('Function', undefined);
  return pkgs.filter((p) => !fns.some((f) => functionUses(f, 'Package', p.metadata.namespace, p.metadata.name)));
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

  withListOutput(
    pkg
      .command('list')
      .description('List packages')
      .option('-A, --all-namespaces', 'every namespace')
      .option('--orphan', 'only packages no function uses')
      .addOption(new Option('--status <status>', 'only packages with this build status').choices(BUILD_STATUSES)),
  ).action(async (f: { allNamespaces?: boolean; orphan?: boolean; status?: string } & ListOutputFlags) => {
    const c = ctx();
    const ns = f.allNamespaces ? undefined : c.namespace;
    let items = await c.client().list('Package', ns);
    if (f.status !== undefined) items = items.filter((p) => (p.status?.buildstatus ?? 'none') === f.status);
    if (f.orphan) items = await orphans(c, items);
    await printList(c.io, items, f, {
      header: ['NAME', 'BUILD_STATUS', 'ENV', 'LASTUPDATEDAT', 'NAMESPACE'],
      row: (p) => [p.metadata.name, p.status?.buildstatus ?? 'none', p.spec.environment.name, p.status?.lastUpdateTimestamp ?? p.metadata.creationTimestamp, p.metadata.namespace],
    });
  });

  pkg
    .command('delete')
    .description('Delete a package, or with --orphan every package of the namespace no function uses')
    .option('--name <name>', 'package name')
    .option('-f, --force', 'delete even if functions use it')
    .option('--orphan', 'delete every package of the namespace that no function uses')
    .option('--ignorenotfound', 'succeed when it does not exist')
    .action(async (f: { name?: string; force?: boolean; orphan?: boolean; ignorenotfound?: boolean }) => {
      const c = ctx();
      if (f.name === undefined && !f.orphan) throw usage('need --name or --orphan flag');
      if (f.name !== undefined) {
        try {
          await c.client().delete('Package', c.namespace, checkName('--name', f.name), f.force);
          c.io.out(`Package '${f.name}' deleted\n`);
        } catch (err) {
          if (!(f.ignorenotfound && (err as { code?: string }).code === 'FLINT_ERR_NOT_FOUND')) throw err;
        }
      }
      if (f.orphan) {
        for (const p of await orphans(c, await c.client().list('Package', c.namespace))) {
          // Never forced: a function made since the listing makes the control plane refuse, and the package stays.
          try {
            await c.client().delete('Package', p.metadata.namespace, p.metadata.name);
            c.io.out(`Package '${p.metadata.name}' deleted\n`);
          } catch (err) {
            const code = (err as { code?: string }).code;
            if (code === 'FLINT_ERR_IN_USE') c.warn(`package '${p.metadata.name}' is used by a function now; not deleted`);
            else if (code !== 'FLINT_ERR_NOT_FOUND') throw err;
          }
        }
        c.io.out('Orphan packages deleted\n');
      }
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
