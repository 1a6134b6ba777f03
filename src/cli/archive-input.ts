// What the CLI makes of `--src`, `--deploy` and `--code`: a URL stays a URL;
// files and directories become one archive (a single zip is taken as it is,
// anything else is zipped, except `--code`, which is kept as the one file it
// is). Small archives are embedded in the package, larger ones are uploaded
// to the control plane's archive store first (Fission's 256 KiB rule).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ARCHIVE_URL_PREFIX, MAX_LITERAL_BYTES, SHA256_HEX } from '../api/build-command.ts';
import type { Archive } from '../api/kinds.ts';
import { isZipFile, sha256File, zipDirectory, zipFiles } from '../archive/index.ts';
import { usage } from './flags.ts';
import type { Ctx } from './io.ts';

const isUrl = (s: string) => /^https?:\/\//i.test(s);

function checkChecksum(flag: string, sum: string | undefined): string | undefined {
  if (sum === undefined) return undefined;
  const lower = sum.toLowerCase();
  if (!SHA256_HEX.test(lower)) throw usage(`${flag} must be a sha256 (64 hex digits), got '${sum}'`);
  return lower;
}

/**
 * One file as a package archive: embedded when small, uploaded otherwise.
 * With `dryRun`, nothing is uploaded: the archive is the one an upload would
 * give (the store names an archive by its sha256).
 */
export async function archiveOfFile(c: Ctx, file: string, checksum?: string, flag = 'archive', dryRun = false): Promise<Archive> {
  const sum = await sha256File(file);
  if (checksum && checksum !== sum) throw usage(`${flag}: the archive's sha256 is ${sum}, not ${checksum}`);
  const size = fs.statSync(file).size;
  if (size <= MAX_LITERAL_BYTES) return { type: 'literal', literal: fs.readFileSync(file).toString('base64'), checksum: { type: 'sha256', sum } };
  if (dryRun) return { type: 'url', url: `${ARCHIVE_URL_PREFIX}${sum}`, checksum: { type: 'sha256', sum } };
  const up = await c.client().uploadArchive(file, sum);
  return { type: 'url', url: up.url, checksum: up.checksum };
}

function statOrUsage(flag: string, cwd: string, given: string): { file: string; dir: boolean } {
  const file = path.resolve(cwd, given);
  try {
    return { file, dir: fs.statSync(file).isDirectory() };
  } catch (err) {
    throw usage(`${flag}: cannot read '${given}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/**
 * One archive from a flag's values. `keepAsIs` (--code): a single plain file
 * is not zipped. `checksumFlag` names the flag a checksum came from.
 */
export async function archiveFrom(c: Ctx, flag: string, inputs: string[], opts: { checksum?: string; checksumFlag?: string; keepAsIs?: boolean } = {}): Promise<Archive> {
  const checksum = checkChecksum(opts.checksumFlag ?? `${flag} checksum`, opts.checksum);
  if (inputs.some(isUrl)) {
    if (inputs.length > 1) throw usage(`${flag}: give one URL, or local files, not both`);
    return checksum ? { type: 'url', url: inputs[0], checksum: { type: 'sha256', sum: checksum } } : { type: 'url', url: inputs[0] };
  }
  const items = inputs.map((i) => statOrUsage(flag, c.io.cwd, i));
  if (items.length === 1 && !items[0].dir && (opts.keepAsIs || (await isZipFile(items[0].file)))) return archiveOfFile(c, items[0].file, checksum, flag);
  if (items.some((i) => i.dir) && items.length > 1) throw usage(`${flag}: give one directory, or files, not both`);
  if (checksum) throw usage(`${opts.checksumFlag ?? flag}: a checksum applies to a zip file or a URL, not to files the CLI zips`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-archive-'));
  try {
    const zip = path.join(tmp, 'archive.zip');
    if (items[0].dir) await zipDirectory(items[0].file, zip);
    else await zipFiles(items.map((i) => ({ path: i.file, name: path.basename(i.file) })), zip);
    return await archiveOfFile(c, zip, undefined, flag);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** The bytes of an archive: embedded, in this control plane's store, or at a URL. */
export async function archiveBytes(c: Ctx, a: Archive): Promise<Buffer> {
  if (a.type === 'literal') return Buffer.from(a.literal ?? '', 'base64');
  const url = a.url ?? '';
  if (url.startsWith('/')) return await (await c.client().raw('GET', url)).bytes();
  // fetch, not the light client: an archive's URL may redirect (release downloads do).
  const res = await fetch(url).catch((err: Error) => {
    throw usage(`cannot download ${url}: ${err.message}`);
  });
  if (!res.ok) throw usage(`cannot download ${url}: the server answered ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}
