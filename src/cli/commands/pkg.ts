import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { Archive, Package } from '../../api/kinds.ts';
import { checkName, kubifyName, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { table } from '../output.ts';

interface PkgFlags {
  name?: string;
  env?: string;
  code?: string;
  deploy?: string;
  src?: string;
  buildcmd?: string;
  force?: boolean;
}

function literalOf(cwd: string, flag: string, given: string): Archive {
  const file = path.resolve(cwd, given);
  let bytes: Buffer;
  try {
    if (fs.statSync(file).isDirectory()) throw usage(`${flag} '${given}' is a directory: directory and zip archives need the build support, not available yet`);
    bytes = fs.readFileSync(file);
  } catch (err) {
    if ((err as { code?: string }).code === 'FLINT_ERR_USAGE') throw err;
    throw usage(`${flag}: cannot read '${given}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return { type: 'literal', literal: bytes.toString('base64') };
}

function suffix(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  return [...randomBytes(4)].map((b) => alphabet[b % alphabet.length]).join('');
}

/** `hello.zip` -> `hello-zip-k3x9`, as Fission names packages. */
export function packageNameFor(file: string): string {
  return kubifyName(`${path.basename(file)}-${suffix()}`);
}

export function registerPkg(program: Command, ctx: () => Ctx): void {
  const pkg = program.command('package').alias('pkg').description('Packages: the code of functions, as files or archives');

  pkg
    .command('create')
    .description('Create a package')
    .option('--name <name>', 'package name (default: <file>-<4 random characters>)')
    .requiredOption('--env <name>', 'environment the package is for')
    .option('--code <file>', 'a single source file, kept as is')
    .option('--deployarchive, --deploy <file>', 'a ready-to-run file')
    .option('--sourcearchive, --src <file>', 'source to be built by the environment builder')
    .option('--buildcmd <command>', 'build command (default: the environment builder\'s)')
    .action(async (f: PkgFlags) => {
      const c = ctx();
      checkName('--env', f.env as string);
      const given = [f.code, f.deploy, f.src].filter(Boolean).length;
      if (given === 0) throw usage('need one of --code, --deploy or --src');
      if (f.code && f.deploy) throw usage('use either --code or --deploy, not both');
      const spec: Package['spec'] = { environment: { name: f.env as string, namespace: c.namespace } };
      if (f.src) spec.source = literalOf(c.io.cwd, '--src', f.src);
      if (f.deploy) spec.deployment = literalOf(c.io.cwd, '--deploy', f.deploy);
      if (f.code) spec.deployment = literalOf(c.io.cwd, '--code', f.code);
      if (f.buildcmd) spec.buildcmd = f.buildcmd;
      const name = f.name ? checkName('--name', f.name) : packageNameFor((f.src ?? f.deploy ?? f.code) as string);
      await c.client().create<Package>({ kind: 'Package', metadata: { name, namespace: c.namespace }, spec });
      c.io.out(`Package '${name}' created\n`);
    });

  pkg
    .command('update')
    .description("Update a package's code")
    .requiredOption('--name <name>', 'package name')
    .option('--env <name>', 'environment')
    .option('--code <file>', 'a single source file')
    .option('--deployarchive, --deploy <file>', 'a ready-to-run file')
    .option('--sourcearchive, --src <file>', 'source to be built')
    .option('--buildcmd <command>', 'build command')
    .action(async (f: PkgFlags) => {
      const c = ctx();
      const cur = await c.client().get('Package', c.namespace, checkName('--name', f.name as string));
      if (f.env) cur.spec.environment = { name: checkName('--env', f.env), namespace: c.namespace };
      if (f.src) cur.spec.source = literalOf(c.io.cwd, '--src', f.src);
      if (f.deploy) cur.spec.deployment = literalOf(c.io.cwd, '--deploy', f.deploy);
      if (f.code) cur.spec.deployment = literalOf(c.io.cwd, '--code', f.code);
      if (f.buildcmd) cur.spec.buildcmd = f.buildcmd;
      await c.client().update(cur);
      c.io.out(`Package '${f.name}' updated\n`);
    });

  pkg
    .command('info')
    .description("Show a package's status and build log")
    .requiredOption('--name <name>', 'package name')
    .action(async (f: { name: string }) => {
      const c = ctx();
      const p = await c.client().get('Package', c.namespace, checkName('--name', f.name));
      table(c.io, ['Name:', p.metadata.name], [
        ['Environment:', p.spec.environment.name],
        ['Status:', p.status?.buildstatus ?? 'none'],
        ['Build Logs:', ''],
      ]);
      const log = (p.status?.buildlog ?? '').replace(/\\n/g, '\n');
      if (log) c.io.out(log.endsWith('\n') ? log : `${log}\n`);
    });

  pkg
    .command('list')
    .description('List packages')
    .option('-A, --all-namespaces', 'every namespace')
    .action(async (f: { allNamespaces?: boolean }) => {
      const c = ctx();
      const items = await c.client().list('Package', f.allNamespaces ? undefined : c.namespace);
      table(
        c.io,
        ['NAME', 'BUILD_STATUS', 'ENV', 'LASTUPDATEDAT', 'NAMESPACE'],
        items.map((p) => [p.metadata.name, p.status?.buildstatus ?? 'none', p.spec.environment.name, p.status?.lastUpdateTimestamp ?? p.metadata.creationTimestamp, p.metadata.namespace]),
      );
    });

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
        if (!a?.literal) throw usage(`package '${f.name}' has no ${which === 'getsrc' ? 'source' : 'deploy'} archive`);
        const bytes = Buffer.from(a.literal, 'base64');
        if (f.output) fs.writeFileSync(path.resolve(c.io.cwd, f.output), bytes);
        else c.io.out(bytes.toString('utf8'));
      });
  }
}
