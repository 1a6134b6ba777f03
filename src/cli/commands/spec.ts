// `flint spec`: a directory of resource files, applied as a whole.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { kubifyName, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { type ListOutputFlags, printList, withListOutput } from '../output.ts';
import type { SpecSet } from '../spec/documents.ts';
import { DEPLOYMENT_CONFIG_FILE } from '../spec/names.ts';

// Loaded by the commands that read specs: the YAML parser, the schemas and zip handling.
const apply = () => import('../spec/apply.ts');

const DEFAULT_DIR = 'specs';

/**
 * Reads and checks the specs. With the server's mode known, images are
 * checked as the server will (local mode runs built-in runtimes only), so
 * apply does not stop half-way on one.
 */
async function specSet(c: Ctx, dir: string, server: 'required' | 'optional', warn = false): Promise<SpecSet> {
  let mode: string | undefined;
  try {
    mode = (await c.client().info()).mode;
  } catch (err) {
    if (server === 'required') throw err;
  }
  const { readSpecs } = await import('../spec/documents.ts');
  const set = readSpecs(path.resolve(c.io.cwd, dir), { localImages: mode === 'local' });
  if (warn) for (const w of set.warnings) c.warn(w);
  return set;
}

export function registerSpec(cmd: Command, ctx: () => Ctx): void {
  const withDir = (x: Command) => x.option('--specdir <dir>', 'the spec directory', DEFAULT_DIR);

  withDir(cmd.command('init').description('Create a spec directory with its deployment config'))
    .option('--name <name>', 'deployment name (default: the current directory name)')
    .action((f: { specdir: string; name?: string }) => {
      const c = ctx();
      const dir = path.resolve(c.io.cwd, f.specdir);
      const file = path.join(dir, DEPLOYMENT_CONFIG_FILE);
      if (fs.existsSync(file)) throw usage(`${path.relative(c.io.cwd, file)} already exists`);
      fs.mkdirSync(dir, { recursive: true });
      const name = kubifyName(f.name ?? path.basename(c.io.cwd));
      fs.writeFileSync(
        file,
        `# flint spec apply reads every .yaml, .yml and .json file in this directory.\n# The uid marks the resources this directory owns; keep it.\napiVersion: flint.dev/v1\nkind: DeploymentConfig\nname: ${name}\nuid: ${randomUUID()}\n`,
      );
      c.io.out(`Creating spec directory '${path.relative(c.io.cwd, dir) || '.'}'\n`);
    });

  withDir(cmd.command('validate').description('Check the specs without applying them (images too when the control plane is reachable)')).action(async (f: { specdir: string }) => {
    const c = ctx();
    const set = await specSet(c, f.specdir, 'optional', true);
    (await apply()).checkArchiveFiles(set);
    c.io.out(`${set.resources.length} resources and ${set.archives.size} archives are valid\n`);
  });

  withDir(cmd.command('apply').description('Create or update every resource of the specs'))
    .option('--delete', 'also delete resources this spec directory applied before and no longer declares')
    .option('--dry-run', 'print what would be created, updated (with the fields that change) and deleted; upload and write nothing')
    .action(async (f: { specdir: string; delete?: boolean; dryRun?: boolean }) => {
      const c = ctx();
      const dryRun = f.dryRun === true;
      const report = await (await apply()).applySpecs(c, await specSet(c, f.specdir, 'required', true), { delete: f.delete === true, dryRun });
      const lines = report.lines();
      if (dryRun) lines.push(...report.changes());
      c.io.out(lines.length > 0 ? `${lines.join('\n')}\n` : `nothing to change (${report.unchanged} resources up to date)\n`);
      if (dryRun) c.io.out('(dry run - no changes made)\n');
    });

  withDir(cmd.command('destroy').description('Delete every resource this spec directory applied')).action(async (f: { specdir: string }) => {
    const c = ctx();
    const lines = (await (await apply()).destroySpecs(c, await specSet(c, f.specdir, 'required'))).lines();
    c.io.out(lines.length > 0 ? `${lines.join('\n')}\n` : 'nothing to delete\n');
  });

  withListOutput(withDir(cmd.command('list').description('List the resources this spec directory applied'))).action(async (f: { specdir: string } & ListOutputFlags) => {
    const c = ctx();
    const owned = await (await apply()).ownedResources(c, await specSet(c, f.specdir, 'required'));
    await printList(c.io, owned, f, { header: ['KIND', 'NAME', 'NAMESPACE'], row: (r) => [r.kind, r.metadata.name, r.metadata.namespace] });
  });
}
