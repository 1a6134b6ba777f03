// Checks objects against the JSON schemas in ./schemas (written for these
// tests from the Kubernetes API reference), with ajv.
import fs from 'node:fs';
import path from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const ajv = addFormats(new Ajv({ allErrors: true, strict: true, strictRequired: false }));
const cache = new Map<string, ValidateFunction>();

function validator(file: string): ValidateFunction {
  let v = cache.get(file);
  if (!v) {
    v = ajv.compile(JSON.parse(fs.readFileSync(path.join(import.meta.dirname, 'schemas', file), 'utf8')));
    cache.set(file, v);
  }
  return v;
}

/** The schema violations of `obj` as `path: message` lines; empty when valid. */
export function schemaErrors(file: string, obj: unknown): string[] {
  const v = validator(file);
  if (v(obj)) return [];
  return (v.errors ?? []).map((e) => `${e.instancePath || '(root)'}: ${e.message}${e.params && 'allowedValues' in e.params ? ` ${JSON.stringify(e.params.allowedValues)}` : ''}`);
}

export const INGRESS_SCHEMA = 'networking.k8s.io_v1_Ingress.json';

export function ingressSchemaErrors(obj: unknown): string[] {
  return schemaErrors(INGRESS_SCHEMA, obj);
}
