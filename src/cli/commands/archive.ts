// `flint archive`: the control plane's archive store, as Fission's `archive`
// commands. An archive's id is its sha256; its URL (/v1/archives/<sha256>,
// as packages and `archive list` show it) is taken too.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { ARCHIVE_URL_PREFIX, SHA256_HEX } from '../../api/build-command.ts';
import { FlintError, isFlintError } from '../../api/errors.ts';
import { usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { age, LIST_FORMATS, type ListOutputFlags, printObject, table, withListOutput } from '../output.ts';

export interface ArchiveItem {
  sha256: string;
  url: string;
  size: number;
  createdAt: string;
  packages: string[];
}

function archiveId(given: string): string {
  const id = (given.startsWith(ARCHIVE_URL_PREFIX) ? given.slice(ARCHIVE_URL_PREFIX.length) : given).toLowerCase();
  if (!SHA256_HEX.test(id)) throw usage(`--id '${given.slice(0, 100)}' is not an archive id: give its sha256 (64 hex digits) or its URL ${ARCHIVE_URL_PREFIX}<sha256>`);
  return id;
}

/** The store's "no such archive" said the same way for every command. */
function notFound(err: unknown, id: string): unknown {
  return isFlintError(err) && err.code === 'FLINT_ERR_NOT_FOUND' ? new FlintError('FLINT_ERR_NOT_FOUND', `archive ${id} not found`) : err;
}

export function registerArchive(archive: Command, ctx: () => Ctx): void {
  archive
    .command('upload')
    .description('Upload a file to the archive store (a package refers to it by its URL)')
    .requiredOption('--name <file>', 'the file to upload')
    .addOption(new Option('-o, --output <format>', 'json or yaml: the URL, checksum and size').choices(['json', 'yaml']))
    .action(async (f: { name: string; output?: string }) => {
      const c = ctx();
      const file = path.resolve(c.io.cwd, f.name);
      let st: fs.Stats;
      try {
        st = fs.statSync(file);
      } catch (err) {
        throw usage(`--name: cannot read '${f.name}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
      if (!st.isFile()) throw usage(`--name: '${f.name}' is not a file`);
      const { sha256File } = await import('../../archive/checksum.ts');
      const up = await c.client().uploadArchive(file, await sha256File(file));
      if (f.output !== undefined) await printObject(c.io, up, f.output);
      else c.io.out(`File successfully uploaded with ID: ${up.checksum.sum}\n`);
    });

  withListOutput(archive.command('list').description('List the stored archives and the packages that use them').option('--orphan', 'only archives no package uses')).action(
    async (f: ListOutputFlags & { orphan?: boolean }) => {
      const c = ctx();
      let items = (await c.client().json<{ items: ArchiveItem[] }>('GET', '/v1/archives')).items;
      if (f.orphan) items = items.filter((i) => i.packages.length === 0);
      if (f.output === 'json' || f.output === 'yaml') {
        await printObject(c.io, items, f.output);
        return;
      }
      if (f.output !== 'table' && f.output !== 'wide') throw usage(`unknown output format '${f.output}': use ${LIST_FORMATS.join(', ')}`);
      const wide = f.output === 'wide';
      const now = Date.now();
      table(
        c.io,
        f.headers === false ? undefined : ['ID', 'SIZE', 'PACKAGES', ...(wide ? ['AGE'] : [])],
        items.map((i) => [i.sha256, i.size, i.packages.join(',') || '<none>', ...(wide ? [age(i.createdAt, now)] : [])]),
      );
    },
  );

  archive
    .command('get-url')
    .description("Print an archive's download URL")
    .requiredOption('--id <sha256>', 'the archive')
    .action(async (f: { id: string }) => {
      const c = ctx();
      const id = archiveId(f.id);
      const client = c.client();
      await (await client.raw('HEAD', `${ARCHIVE_URL_PREFIX}${id}`).catch((err) => Promise.reject(notFound(err, id)))).text();
      c.io.out(`URL: ${client.baseUrl}${ARCHIVE_URL_PREFIX}${id}\n`);
    });

  archive
    .command('download')
    .description('Download an archive, checking its sha256')
    .requiredOption('--id <sha256>', 'the archive')
    .option('-o, --output <file>', 'where to write it (default: its id, in the current directory)')
    .action(async (f: { id: string; output?: string }) => {
      const c = ctx();
      const id = archiveId(f.id);
      const target = path.resolve(c.io.cwd, f.output ?? id);
      const res = await c.client().raw('GET', `${ARCHIVE_URL_PREFIX}${id}`);
      // Written beside the target and renamed into place once its hash is right: a cut or altered download leaves nothing.
      const tmp = path.join(path.dirname(target), `.${path.basename(target)}.${randomBytes(4).toString('hex')}.part`);
      const out = fs.createWriteStream(tmp, { flags: 'wx', mode: 0o600 });
      const hash = createHash('sha256');
      try {
        for await (const chunk of res.chunks()) {
          hash.update(chunk);
          if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
        }
        await new Promise<void>((resolve, reject) => {
          out.once('error', reject);
          out.end(resolve);
        });
        const got = hash.digest('hex');
        if (got !== id) throw new FlintError('FLINT_ERR_BAD_ARCHIVE', `archive ${id} arrived with sha256 ${got}: not kept`);
        fs.renameSync(tmp, target);
      } catch (err) {
        out.destroy();
        fs.rmSync(tmp, { force: true });
        throw err;
      }
      c.io.out(`File download complete. File name: ${path.relative(c.io.cwd, target) || target}\n`);
    });

  archive
    .command('delete')
    .description('Delete an archive (refused while a package uses it)')
    .requiredOption('--id <sha256>', 'the archive')
    .action(async (f: { id: string }) => {
      const c = ctx();
      const id = archiveId(f.id);
      await c.client().json('DELETE', `${ARCHIVE_URL_PREFIX}${id}`);
      c.io.out(`Deleted archive with id: ${id}\n`);
    });
}
