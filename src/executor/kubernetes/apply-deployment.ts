// Writing the Deployments Flint owns (pools, newdeploy functions) without
// needless or conflicting writes. The API server fills defaults into what it
// stores, so the stored object never equals the desired one and comparing
// them says nothing; a hash of the desired object, kept in an annotation,
// says whether Flint's own intent changed. Replicas are compared as they
// stand, since someone may have scaled the Deployment. The write is a
// server-side apply: the Deployment controller keeps writing the same object
// (status, revision annotation), so a replace from an earlier read meets 409s,
// while an apply names no version and touches only Flint's fields.
import { createHash } from 'node:crypto';
import type { GroupVersionResource, KubeClient, KubeObject } from '../../store/kube-client.ts';

export const DEPLOYMENTS: GroupVersionResource = { group: 'apps', version: 'v1', resource: 'deployments' };
/** The hash of what Flint last applied, replicas aside. */
export const APPLIED_HASH = 'flint.dev/applied-hash';

export function desiredHash(desired: KubeObject): string {
  const spec = { ...(desired.spec as Record<string, unknown>) };
  delete spec.replicas;
  const { [APPLIED_HASH]: _, ...annotations } = desired.metadata.annotations ?? {};
  const intent = { labels: desired.metadata.labels ?? {}, annotations, spec };
  return createHash('sha256').update(JSON.stringify(intent)).digest('hex').slice(0, 32);
}

/**
 * Makes the Deployment what `desired` says, reading it first unless the caller just did (`current`, null for
 * none). Returns what was done; 'unchanged' sent no write at all.
 */
export async function applyDeployment(client: KubeClient, desired: KubeObject, current?: KubeObject | null): Promise<'created' | 'updated' | 'unchanged'> {
  const ns = desired.metadata.namespace as string;
  const name = desired.metadata.name;
  const found = current === undefined ? await client.get<KubeObject>(DEPLOYMENTS, ns, name) : current;
  const hash = desiredHash(desired);
  const replicas = (desired.spec as { replicas?: number }).replicas;
  if (found && found.metadata.annotations?.[APPLIED_HASH] === hash && (found.spec as { replicas?: number }).replicas === replicas) return 'unchanged';
  const obj: KubeObject = { ...desired, metadata: { ...desired.metadata, annotations: { ...desired.metadata.annotations, [APPLIED_HASH]: hash } } };
  await client.apply(DEPLOYMENTS, ns, name, obj);
  return found ? 'updated' : 'created';
}
