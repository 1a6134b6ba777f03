// The Kubernetes API client kubernetes mode runs with: the pod's own service
// account in a cluster, or the API server, token and CA the install values
// name (a control plane outside the cluster, tests).
import fs from 'node:fs';
import { FlintError } from '../api/errors.ts';
import type { Values } from '../config/values.ts';
import { createKubeClient, inClusterKubeClientOptions, type KubeClient, type KubeClientOptions } from '../store/kube-client.ts';

function readFileValue(key: string, file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new FlintError('FLINT_ERR_CONFIG', `install value '${key}' names a file that cannot be read: ${(err as Error).message}`, { field: key });
  }
}

export function kubeClientFromValues(v: Values['kubernetes'], extra: Pick<KubeClientOptions, 'onWarning'> = {}): KubeClient {
  if (!v.apiServer) return createKubeClient({ ...inClusterKubeClientOptions(), ...extra });
  const ca = v.caFile ? readFileValue('kubernetes.caFile', v.caFile) : undefined;
  let token: (() => string | undefined) | undefined;
  if (v.tokenFile) {
    readFileValue('kubernetes.tokenFile', v.tokenFile);
    let cached: { token: string; at: number } | undefined;
    // Re-read now and then: projected tokens rotate.
    token = () => {
      if (!cached || Date.now() - cached.at > 60_000) cached = { token: readFileValue('kubernetes.tokenFile', v.tokenFile), at: Date.now() };
      return cached.token;
    };
  }
  return createKubeClient({ baseUrl: v.apiServer, token, ca, insecureSkipTLSVerify: v.insecureSkipTLSVerify, ...extra });
}
