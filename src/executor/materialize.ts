// Puts a function's code, secrets and configmaps where its worker reads them,
// before specialization: code under userfunc/, secrets and configmaps as
// files <dir>/<namespace>/<name>/<key>.
import fs from 'node:fs';
import path from 'node:path';
import { FlintError } from '../api/errors.ts';
import type { FunctionResource, Package } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';
import type { WorkerHandle } from './process/worker-process.ts';

const ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x03, 0x04]);

export interface Materialized {
  filepath: string;
  functionName?: string;
  env?: Record<string, string>;
}

async function writeData(store: Store, kind: 'Secret' | 'ConfigMap', refs: FunctionResource['spec']['secrets'], fnNs: string, dir: string): Promise<void> {
  for (const ref of refs ?? []) {
    const ns = ref.namespace ?? fnNs;
    const obj = await store.get(kind, ns, ref.name);
    if (!obj) throw new FlintError('FLINT_ERR_NOT_FOUND', `${kind === 'Secret' ? 'secret' : 'configmap'} '${ref.name}' not found in namespace '${ns}'`);
    const target = path.join(dir, ns, ref.name);
    fs.mkdirSync(target, { recursive: true });
    for (const [key, value] of Object.entries(obj.data ?? {})) {
      fs.writeFileSync(path.join(target, key), value, { mode: kind === 'Secret' ? 0o400 : 0o444 });
    }
  }
}

export async function materialize(store: Store, fn: FunctionResource, pkg: Package, worker: WorkerHandle): Promise<Materialized> {
  const archive = pkg.spec.deployment;
  if (!archive) {
    const status = pkg.status?.buildstatus ?? 'pending';
    throw new FlintError('FLINT_ERR_UNAVAILABLE', `package '${pkg.metadata.name}' has no deployment archive yet (build status: ${status})`);
  }
  if (archive.type !== 'literal' || archive.literal === undefined) {
    throw new FlintError('FLINT_ERR_UNAVAILABLE', `package '${pkg.metadata.name}': archives stored by URL are not supported by this executor yet`);
  }
  const bytes = Buffer.from(archive.literal, 'base64');
  if (bytes.subarray(0, 4).equals(ZIP_MAGIC)) {
    throw new FlintError('FLINT_ERR_UNAVAILABLE', `package '${pkg.metadata.name}' holds a zip archive: zip deployments need the archive support, not available yet`);
  }
  fs.writeFileSync(path.join(worker.hostDirs.userfunc, 'deployarchive'), bytes, { mode: 0o444 });
  await writeData(store, 'Secret', fn.spec.secrets, fn.metadata.namespace, worker.hostDirs.secrets);
  await writeData(store, 'ConfigMap', fn.spec.configmaps, fn.metadata.namespace, worker.hostDirs.configs);
  return {
    filepath: path.posix.join(worker.sandboxDirs.userfunc, 'deployarchive'),
    functionName: fn.spec.package.functionName || undefined,
    env: fn.spec.env,
  };
}
