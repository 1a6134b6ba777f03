// A package's archives are checked when the package is written: a zip with an
// unsafe entry, or a reference to an archive this server does not hold, is
// refused then, naming the field, rather than failing a build or a cold start
// later. URL archives elsewhere are checked when they are fetched.
import { storedArchiveSha } from '../api/build-command.ts';
import { FlintError } from '../api/errors.ts';
import type { Archive, Package } from '../api/kinds.ts';
import { type ArchiveStore, isZipBuffer, isZipFile } from '../archive/index.ts';
import { type InspectLimits, inspectZip } from '../archive/zip-inspect.ts';

async function checkOne(field: string, a: Archive, archives: ArchiveStore | undefined, limits: InspectLimits): Promise<void> {
  const problem = (err: unknown) => {
    if (err instanceof FlintError) return new FlintError(err.code, `${field}: ${err.message}`, { field });
    return err;
  };
  if (a.type === 'literal') {
    const bytes = Buffer.from(a.literal ?? '', 'base64');
    if (isZipBuffer(bytes)) await inspectZip(bytes, limits).catch((e) => Promise.reject(problem(e)));
    return;
  }
  const sha = storedArchiveSha(a.url ?? '');
  if (!sha || !archives) return;
  if (!(await archives.get(sha))) throw new FlintError('FLINT_ERR_BAD_ARCHIVE', `${field}: archive ${sha} has not been uploaded to this server (POST /v1/archives)`, { field });
  const file = await archives.pathOf(sha);
  if (await isZipFile(file)) await inspectZip(file, limits).catch((e) => Promise.reject(problem(e)));
}

export async function checkPackageArchives(pkg: Package, archives: ArchiveStore | undefined, limits: InspectLimits): Promise<void> {
  if (pkg.spec.source) await checkOne('spec.source', pkg.spec.source, archives, limits);
  if (pkg.spec.deployment) await checkOne('spec.deployment', pkg.spec.deployment, archives, limits);
}
