// The namespaces kubernetes mode writes into must exist: the API server
// answers a write into a missing one with a 404 that reads like the object
// is missing. At start-up the server makes the ones it uses when its
// identity may, and otherwise says which one is missing and what to do. The
// chart's identity may read these two namespaces but not create them (the
// chart makes them itself); an identity that may not even read them gets a
// 403, taken as "assume they are there": a write into a missing one still
// fails with FLINT_ERR_NAMESPACE_NOT_FOUND.
import { FlintError } from '../api/errors.ts';
import type { GroupVersionResource, KubeClient, KubeObject } from '../store/kube-client.ts';

const NAMESPACES: GroupVersionResource = { group: '', version: 'v1', resource: 'namespaces' };

export interface NamespaceNeed {
  name: string;
  /** What Flint keeps there, for the error message. */
  purpose: string;
  labels?: Record<string, string>;
}

interface Log {
  info(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

const codeOf = (err: unknown) => (err as { code?: string }).code;

export async function ensureNamespaces(client: KubeClient, needs: NamespaceNeed[], log: Log): Promise<void> {
  const seen = new Set<string>();
  for (const need of needs) {
    if (seen.has(need.name)) continue;
    seen.add(need.name);
    try {
      if (await client.get(NAMESPACES, undefined, need.name)) continue;
    } catch (err) {
      if (codeOf(err) !== 'FLINT_ERR_FORBIDDEN') throw err;
      log.debug({ namespace: need.name }, 'may not read namespaces: assuming this one exists');
      continue;
    }
    const ns: KubeObject = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: need.name, labels: { 'app.kubernetes.io/managed-by': 'flint', ...need.labels } } };
    try {
      await client.create(NAMESPACES, undefined, ns);
      log.info({ namespace: need.name }, 'namespace created');
    } catch (err) {
      if (codeOf(err) === 'FLINT_ERR_ALREADY_EXISTS') continue;
      if (codeOf(err) !== 'FLINT_ERR_FORBIDDEN') throw err;
      throw new FlintError(
        'FLINT_ERR_NAMESPACE_NOT_FOUND',
        `namespace '${need.name}' (${need.purpose}) does not exist, and this server's Kubernetes identity may not create it: create it (kubectl create namespace ${need.name}), or install Flint with its chart, which does`,
        { cause: err },
      );
    }
  }
}
