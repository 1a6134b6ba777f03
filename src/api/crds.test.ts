import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { CRD_DIR, CUSTOM_KINDS, renderCrd, renderCrdFiles, structural } from './crds.ts';
import { Type } from '@sinclair/typebox';

// What apiextensions.k8s.io/v1 refuses in a structural schema.
const FORBIDDEN = ['const', '$id', '$ref', 'patternProperties', 'uniqueItems', 'definitions', 'dependencies', 'additionalItems', 'default'];

function problems(node: Record<string, any>, at: string): string[] {
  const out: string[] = [];
  if (!node.type && !node['x-kubernetes-preserve-unknown-fields']) out.push(`${at}: no type`);
  for (const k of FORBIDDEN) if (k in node) out.push(`${at}: ${k}`);
  if (node.properties && node.additionalProperties) out.push(`${at}: properties with additionalProperties`);
  if (node.anyOf || node.oneOf || node.allOf) out.push(`${at}: a combinator`);
  for (const [k, v] of Object.entries(node.properties ?? {})) out.push(...problems(v as Record<string, any>, `${at}.${k}`));
  if (node.items) out.push(...problems(node.items, `${at}[]`));
  if (node.additionalProperties && typeof node.additionalProperties === 'object') out.push(...problems(node.additionalProperties, `${at}{}`));
  return out;
}

describe('CRDs', () => {
  it('the committed files are what the schemas render (run `npm run generate` after changing a kind)', () => {
    const rendered = renderCrdFiles();
    assert.deepEqual(fs.readdirSync(CRD_DIR).sort(), [...rendered.keys()].sort());
    for (const [name, text] of rendered) assert.equal(fs.readFileSync(path.join(CRD_DIR, name), 'utf8'), text, name);
  });

  it('every schema is structural, as the API server requires', () => {
    for (const kind of CUSTOM_KINDS) {
      const crd = renderCrd(kind) as any;
      assert.deepEqual(problems(crd.spec.versions[0].schema.openAPIV3Schema, kind), []);
    }
  });

  it('only Package, MessageQueueTrigger, TimeTrigger and CanaryConfig have a status subresource', () => {
    const withStatus = CUSTOM_KINDS.filter((k) => (renderCrd(k) as any).spec.versions[0].subresources?.status);
    assert.deepEqual(withStatus, ['Package', 'MessageQueueTrigger', 'TimeTrigger', 'CanaryConfig']);
  });

  it('translates the schema forms the kinds use', () => {
    assert.deepEqual(structural(Type.Union([Type.Literal('a'), Type.Union([Type.Literal('b'), Type.Literal('')])])), { type: 'string', enum: ['a', 'b', ''] });
    assert.deepEqual(structural(Type.Record(Type.String({ pattern: '^x$' }), Type.Integer({ minimum: 0 }))), { type: 'object', additionalProperties: { type: 'integer', minimum: 0 } });
    assert.deepEqual(structural(Type.Array(Type.String(), { uniqueItems: true, maxItems: 3 })), { type: 'array', items: { type: 'string' }, maxItems: 3, 'x-kubernetes-list-type': 'set' });
    assert.deepEqual(structural(Type.Union([Type.String(), Type.Number()])), { 'x-kubernetes-preserve-unknown-fields': true });
    assert.deepEqual(structural(Type.Object({ a: Type.Optional(Type.Boolean()), b: Type.Integer({ default: 3 }) }, { additionalProperties: false })), {
      type: 'object',
      properties: { a: { type: 'boolean' }, b: { type: 'integer' } },
      required: ['b'],
    });
  });
});
