// How Flint's objects are kept as Kubernetes objects: the five Flint kinds as
// custom resources of flint.dev/v1, Secret and ConfigMap as the cluster's own
// (so functions and TLS read the Secrets users already have). Only the
// metadata Flint knows comes back; the API server's own (managedFields,
// finalizers, ...) stays in the cluster.
import { CUSTOM_KINDS, CRD_GROUP, CRD_VERSION } from '../api/crds.ts';
import { type AnyResource, KINDS, type KindName } from '../api/kinds.ts';
import { API_VERSION, type StoredMeta } from '../api/meta.ts';
import type { GroupVersionResource, KubeObject, KubeObjectMeta } from './kube-client.ts';

/**
 * Core kinds have no metadata.generation; the store keeps Flint's in this
 * annotation, raised when `data` changes, and hides it on the way out.
 */
export const GENERATION_ANNOTATION = 'flint.dev/generation';

export function gvrOf(kind: KindName): GroupVersionResource {
  if (CUSTOM_KINDS.includes(kind)) return { group: CRD_GROUP, version: CRD_VERSION, resource: KINDS[kind].plural };
  return { group: '', version: 'v1', resource: KINDS[kind].plural };
}

export function isCoreKind(kind: KindName): boolean {
  return !CUSTOM_KINDS.includes(kind);
}

function base64Map(data: Record<string, string> | undefined, dir: 'encode' | 'decode'): Record<string, string> | undefined {
  if (!data) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) out[k] = dir === 'encode' ? Buffer.from(v, 'utf8').toString('base64') : Buffer.from(v, 'base64').toString('utf8');
  return out;
}

/** The Kubernetes object to write for a Flint object; `generation` only for core kinds. */
export function toKube(obj: AnyResource, generation?: number): KubeObject {
  const kind = obj.kind;
  const m = obj.metadata;
  const metadata: KubeObjectMeta = { name: m.name, namespace: m.namespace ?? 'default' };
  if (m.resourceVersion !== undefined) metadata.resourceVersion = m.resourceVersion;
  if (m.labels) metadata.labels = { ...m.labels };
  const annotations = { ...m.annotations };
  if (isCoreKind(kind) && generation !== undefined) annotations[GENERATION_ANNOTATION] = String(generation);
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  const data = (obj as { data?: Record<string, string> }).data;
  if (kind === 'Secret') return { apiVersion: 'v1', kind, type: 'Opaque', metadata, ...(data ? { data: base64Map(data, 'encode') } : {}) };
  if (kind === 'ConfigMap') return { apiVersion: 'v1', kind, metadata, ...(data ? { data: { ...data } } : {}) };
  const out: KubeObject = { apiVersion: API_VERSION, kind, metadata, spec: structuredClone((obj as { spec: unknown }).spec) };
  const status = (obj as { status?: unknown }).status;
  if (KINDS[kind].hasStatus && status !== undefined) out.status = structuredClone(status);
  return out;
}

/** The Flint object for a Kubernetes one. */
export function fromKube<T extends AnyResource>(kind: KindName, k: KubeObject): T {
  const km = k.metadata;
  const annotations = { ...km.annotations };
  let generation = km.generation ?? 1;
  if (isCoreKind(kind)) {
    generation = Number(annotations[GENERATION_ANNOTATION] ?? 1) || 1;
    delete annotations[GENERATION_ANNOTATION];
  }
  const metadata: StoredMeta = {
    name: km.name,
    namespace: km.namespace ?? 'default',
    uid: km.uid ?? '',
    resourceVersion: km.resourceVersion ?? '0',
    generation,
    creationTimestamp: km.creationTimestamp ?? '',
  };
  if (km.labels && Object.keys(km.labels).length > 0) metadata.labels = { ...km.labels };
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  const out: Record<string, unknown> = { apiVersion: API_VERSION, kind, metadata };
  const data = k.data as Record<string, string> | undefined;
  if (kind === 'Secret') {
    if (data) out.data = base64Map(data, 'decode');
  } else if (kind === 'ConfigMap') {
    if (data) out.data = { ...data };
  } else {
    out.spec = k.spec;
    if (KINDS[kind].hasStatus) out.status = k.status ?? {};
  }
  return out as unknown as T;
}
