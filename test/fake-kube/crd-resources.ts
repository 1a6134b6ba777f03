// The fake API server's resources for Flint's store: the custom resources as
// the committed CRD files define them (objects are checked against their
// openAPIV3Schema, as the real API server does, and fields the schema does
// not know are warned about, as its pruning does), and core Secrets and
// ConfigMaps.
import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { CRD_DIR } from '../../src/api/crds.ts';
import type { FakeResource } from './server.ts';

const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
for (const keyword of ['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-list-type', 'x-kubernetes-int-or-string']) ajv.addKeyword(keyword);

/** Paths (`spec.foo`) of fields a structural schema would prune: not among an object's properties, nothing preserving them. */
export function unknownFields(schema: any, value: unknown, at = ''): string[] {
  if (!schema || schema['x-kubernetes-preserve-unknown-fields'] === true) return [];
  if (Array.isArray(value)) return value.flatMap((v, i) => unknownFields(schema.items, v, `${at}[${i}]`));
  if (typeof value !== 'object' || value === null) return [];
  const join = (k: string) => (at ? `${at}.${k}` : k);
  return Object.entries(value).flatMap(([k, v]) => {
    if (schema.properties?.[k]) return unknownFields(schema.properties[k], v, join(k));
    if (schema.additionalProperties) return unknownFields(schema.additionalProperties, v, join(k));
    // Every object has these, whatever its schema lists.
    if (!at && ['apiVersion', 'kind', 'metadata'].includes(k)) return [];
    return schema.properties ? [join(k)] : [];
  });
}

export function crdResources(): FakeResource[] {
  const out: FakeResource[] = [];
  for (const file of fs.readdirSync(CRD_DIR).sort()) {
    const crd = parse(fs.readFileSync(path.join(CRD_DIR, file), 'utf8'));
    const version = crd.spec.versions[0];
    const check = ajv.compile(version.schema.openAPIV3Schema);
    out.push({
      group: crd.spec.group,
      version: version.name,
      resource: crd.spec.names.plural,
      kind: crd.spec.names.kind,
      statusSubresource: Boolean(version.subresources?.status),
      validate: (obj) => (check(obj) ? [] : (check.errors ?? []).map((e) => `${e.instancePath || '(root)'}: ${e.message}`)),
      unknownFields: (obj) => unknownFields(version.schema.openAPIV3Schema, obj),
    });
  }
  return out;
}

export const SECRET_RESOURCE: FakeResource = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret' };
export const CONFIGMAP_RESOURCE: FakeResource = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap' };

/** Everything the kubernetes store reads and writes. */
export function storeResources(): FakeResource[] {
  return [...crdResources(), SECRET_RESOURCE, CONFIGMAP_RESOURCE];
}
