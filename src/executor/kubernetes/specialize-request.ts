// What the executor sends a claimed pod's fetcher: where the deployment
// archive is (inline when it lives in the package, else the control plane's
// copy, pinned by its sha256), the data of the function's Secrets and
// ConfigMaps, and what the environment must load.
import { storedArchiveSha } from '../../api/build-command.ts';
import { FlintError } from '../../api/errors.ts';
import type { Environment, FunctionResource, Package } from '../../api/kinds.ts';
import type { SpecializeRequest } from '../../fetcher/request.ts';
import type { Store } from '../../store/store.ts';
import { deploymentArchive } from '../materialize.ts';

export interface SpecializeRequestInput {
  store: Store;
  fn: FunctionResource;
  pkg: Package;
  env: Environment;
  controllerUrl: string;
  authorization?: string;
}

async function dataOf(store: Store, kind: 'Secret' | 'ConfigMap', fn: FunctionResource): Promise<Record<string, Record<string, string>> | undefined> {
  const refs = kind === 'Secret' ? fn.spec.secrets : fn.spec.configmaps;
  if (!refs?.length) return undefined;
  const out: Record<string, Record<string, string>> = {};
  for (const ref of refs) {
    const ns = ref.namespace ?? fn.metadata.namespace;
    const obj = await store.get(kind, ns, ref.name);
    if (!obj) throw new FlintError('FLINT_ERR_NOT_FOUND', `${kind === 'Secret' ? 'secret' : 'configmap'} '${ref.name}' not found in namespace '${ns}'`);
    out[`${ns}/${ref.name}`] = { ...obj.data };
  }
  return out;
}

export async function specializeRequest(i: SpecializeRequestInput): Promise<SpecializeRequest> {
  const archive = deploymentArchive(i.pkg);
  const fetch: SpecializeRequest['FetchReq'] = {
    fetchType: 1,
    filename: 'deployarchive',
    keeparchive: i.env.spec.keeparchive === true,
    checksum: archive.checksum?.sum,
    secrets: await dataOf(i.store, 'Secret', i.fn),
    configmaps: await dataOf(i.store, 'ConfigMap', i.fn),
  };
  if (archive.type === 'literal') fetch.literal = archive.literal ?? '';
  else {
    const url = archive.url ?? '';
    const stored = storedArchiveSha(url);
    if (stored) {
      fetch.url = `${i.controllerUrl.replace(/\/+$/, '')}${url}`;
      fetch.checksum = stored;
      fetch.authorization = i.authorization;
    } else fetch.url = url;
  }
  return {
    FetchReq: fetch,
    LoadReq: {
      filepath: '/userfunc/deployarchive',
      functionName: i.fn.spec.package.functionName || undefined,
      envVersion: i.env.spec.version ?? 2,
      FunctionMetadata: { ...i.fn.metadata },
      env: i.fn.spec.env,
    },
  };
}
