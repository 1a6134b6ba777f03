// CustomResourceDefinitions for kubernetes mode, rendered from the same
// TypeBox schemas the API validates with, so the two cannot drift. The API
// server accepts only "structural" schemas (every node typed; no const,
// $id, patternProperties or uniqueItems; properties and
// additionalProperties never together), so each schema is translated here
// rather than copied. The API boundary stays the strict validator: the CRD
// schema is the cluster's own guard for objects written around Flint (kubectl).
import path from 'node:path';
import type { TSchema } from '@sinclair/typebox';
import { stringify } from 'yaml';
import { KINDS, type KindInfo, type KindName } from './kinds.ts';
import { API_VERSION } from './meta.ts';

export const CRD_GROUP = API_VERSION.split('/')[0];
export const CRD_VERSION = API_VERSION.split('/')[1];
/** Kinds stored as custom resources; Secret and ConfigMap are the cluster's own. */
export const CUSTOM_KINDS: readonly KindName[] = ['Environment', 'Function', 'Package', 'HTTPTrigger', 'MessageQueueTrigger', 'TimeTrigger', 'CanaryConfig'];
export const CRD_DIR = path.join(import.meta.dirname, '..', '..', 'charts', 'flint', 'crds');

/** Fission's short names, so `kubectl get fn` reads the same. */
const SHORT_NAMES: Partial<Record<KindName, string[]>> = {
  Environment: ['env'],
  Function: ['fn'],
  Package: ['pkg'],
  HTTPTrigger: ['ht'],
  MessageQueueTrigger: ['mqt'],
  TimeTrigger: ['tt'],
};

type Json = Record<string, unknown>;

function literalValues(s: Json): unknown[] | undefined {
  if ('const' in s) return [s.const];
  if (Array.isArray(s.anyOf)) {
    const all: unknown[] = [];
    for (const branch of s.anyOf as Json[]) {
      const v = literalValues(branch);
      if (!v) return undefined;
      all.push(...v);
    }
    return all;
  }
  return undefined;
}

/** One TypeBox schema node as a structural OpenAPI v3 schema node. */
export function structural(schema: TSchema | Json): Json {
  const s = schema as Json;
  const out: Json = {};
  if (typeof s.description === 'string') out.description = s.description;
  const literals = literalValues(s);
  if (literals) {
    const types = new Set(literals.map((v) => typeof v));
    if (types.size === 1 && types.has('string')) return { ...out, type: 'string', enum: literals };
  }
  if (Array.isArray(s.anyOf)) {
    // Mixed unions (a quantity as a string or a number) have no structural form: the API validates them.
    return { ...out, 'x-kubernetes-preserve-unknown-fields': true };
  }
  switch (s.type) {
    case 'object': {
      out.type = 'object';
      if (s.properties) {
        const props: Json = {};
        for (const [k, v] of Object.entries(s.properties as Json)) props[k] = structural(v as Json);
        out.properties = props;
        if (Array.isArray(s.required) && s.required.length > 0) out.required = [...s.required];
      } else if (s.patternProperties) {
        const [value] = Object.values(s.patternProperties as Json);
        out.additionalProperties = structural(value as Json);
      } else if (s.additionalProperties && typeof s.additionalProperties === 'object') {
        out.additionalProperties = structural(s.additionalProperties as Json);
      }
      return out;
    }
    case 'array':
      out.type = 'array';
      out.items = structural(s.items as Json);
      if (typeof s.maxItems === 'number') out.maxItems = s.maxItems;
      if (s.uniqueItems === true) out['x-kubernetes-list-type'] = 'set';
      return out;
    case 'string':
      out.type = 'string';
      for (const k of ['minLength', 'maxLength', 'pattern'] as const) if (s[k] !== undefined) out[k] = s[k];
      return out;
    case 'integer':
    case 'number':
      out.type = s.type;
      for (const k of ['minimum', 'maximum'] as const) if (s[k] !== undefined) out[k] = s[k];
      return out;
    case 'boolean':
      return { ...out, type: 'boolean' };
    default:
      return { ...out, 'x-kubernetes-preserve-unknown-fields': true };
  }
}

/** The openAPIV3Schema of one kind: apiVersion, kind, metadata (the API server's own), spec and status. */
export function crdSchema(info: KindInfo): Json {
  const top = info.schema as unknown as Json;
  const props = top.properties as Json;
  const properties: Json = {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object' },
    spec: structural(props.spec as Json),
  };
  if (info.hasStatus) properties.status = structural(props.status as Json);
  return { type: 'object', required: ['spec'], properties };
}

export function renderCrd(kind: KindName): Json {
  const info = KINDS[kind];
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${info.plural}.${CRD_GROUP}` },
    spec: {
      group: CRD_GROUP,
      scope: 'Namespaced',
      names: {
        plural: info.plural,
        singular: kind.toLowerCase(),
        kind,
        listKind: `${kind}List`,
        ...(SHORT_NAMES[kind] ? { shortNames: SHORT_NAMES[kind] } : {}),
      },
      versions: [
        {
          name: CRD_VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: crdSchema(info) },
          ...(info.hasStatus ? { subresources: { status: {} } } : {}),
        },
      ],
    },
  };
}

export function crdFileName(kind: KindName): string {
  return `${CRD_GROUP}_${KINDS[kind].plural}.yaml`;
}

/** Every CRD file as the chart commits it: name -> YAML text. */
export function renderCrdFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const kind of CUSTOM_KINDS) {
    files.set(crdFileName(kind), `# Generated from src/api/kinds.ts by \`npm run generate\`: do not edit.\n${stringify(renderCrd(kind), { lineWidth: 0 })}`);
  }
  return files;
}
