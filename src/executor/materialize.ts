// Puts a function's code, secrets and configmaps where its worker reads them,
// before specialization: the deployment at userfunc/deployarchive (a file, or
// the unpacked zip as a directory, unless the environment keeps archives as
// they are), secrets and configmaps as files <dir>/<namespace>/<name>/<key>.
// Nothing here follows a link (src/fsafe): a link standing in place of a
// directory or file of the instance fails the materialization rather than
// putting a secret, or the code, wherever it points.
import path from 'node:path';
import { FlintError } from '../api/errors.ts';
import type { Archive, FunctionResource, Package } from '../api/kinds.ts';
import { type ArchiveStore, isZipBuffer, isZipFile } from '../archive/index.ts';
import { literalBytes, resolveArchive, storeLiteral } from '../archive/resolve.ts';
import { mkdirUnder } from '../fsafe/mkdir.ts';
import { copyFileNoFollow, writeFileNoFollow } from '../fsafe/open.ts';
import type { Store } from '../store/store.ts';
import type { DeployCache } from './deploy-cache.ts';
import type { WorkerHandle } from './process/worker-process.ts';

export interface Materialized {
  filepath: string;
  functionName?: string;
  env?: Record<string, string>;
}

export interface CodeSource {
  store: Store;
  archives: ArchiveStore;
  deployCache: DeployCache;
}

async function writeData(store: Store, kind: 'Secret' | 'ConfigMap', refs: FunctionResource['spec']['secrets'], fnNs: string, dir: string): Promise<void> {
  for (const ref of refs ?? []) {
    const ns = ref.namespace ?? fnNs;
    const obj = await store.get(kind, ns, ref.name);
    if (!obj) throw new FlintError('FLINT_ERR_NOT_FOUND', `${kind === 'Secret' ? 'secret' : 'configmap'} '${ref.name}' not found in namespace '${ns}'`);
    const target = mkdirUnder(dir, `${ns}/${ref.name}`);
    for (const [key, value] of Object.entries(obj.data ?? {})) {
      writeFileNoFollow(path.join(target, key), value, 'replace', kind === 'Secret' ? 0o400 : 0o444);
    }
  }
}

/** The package's deployment archive, or the reason it has none yet (a build pending or failed). Shared by every executor backend. */
export function deploymentArchive(pkg: Package): Archive {
  const archive = pkg.spec.deployment;
  if (archive) return archive;
  const status = pkg.status?.buildstatus ?? 'pending';
  const why = status === 'failed' ? `its build failed: see flint package info --name ${pkg.metadata.name}` : `build status: ${status}`;
  throw new FlintError('FLINT_ERR_UNAVAILABLE', `package '${pkg.metadata.name}' has no deployment archive yet (${why})`);
}

export async function materialize(src: CodeSource, fn: FunctionResource, pkg: Package, keepArchive: boolean, worker: WorkerHandle): Promise<Materialized> {
  const archive = deploymentArchive(pkg);
  const target = path.join(worker.hostDirs.userfunc, 'deployarchive');
  const literal = archive.type === 'literal' ? literalBytes(archive) : undefined;
  if (literal !== undefined && (keepArchive || !isZipBuffer(literal.bytes))) {
    // A single-file function straight from the package: no store round trip on its cold start.
    writeFileNoFollow(target, literal.bytes, 'replace');
  } else {
    const resolved = literal !== undefined ? await storeLiteral(src.archives, literal) : await resolveArchive(src.archives, archive);
    if (!keepArchive && (await isZipFile(resolved.path))) await src.deployCache.checkout(resolved.sha256, resolved.path, target);
    else await copyFileNoFollow(resolved.path, target, 'replace');
  }
  await writeData(src.store, 'Secret', fn.spec.secrets, fn.metadata.namespace, worker.hostDirs.secrets);
  await writeData(src.store, 'ConfigMap', fn.spec.configmaps, fn.metadata.namespace, worker.hostDirs.configs);
  return {
    filepath: path.posix.join(worker.sandboxDirs.userfunc, 'deployarchive'),
    functionName: fn.spec.package.functionName || undefined,
    env: fn.spec.env,
  };
}
