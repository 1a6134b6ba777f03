// The fake API server's resources for Flint's store: the custom resources as
// the committed CRD files define them (objects are checked against their
// openAPIV3Schema, as the real API server does), and core Secrets and ConfigMaps.
import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { CRD_DIR } from '../../src/api/crds.ts';
import type { FakeResource } from './server.ts';

const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
for (const keyword of ['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-list-type', 'x-kubernetes-int-or-string']) ajv.addKeyword(keyword);

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
