import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { archiveFiles } from './apply.ts';
import { readSpecs } from './documents.ts';
import { fromFission } from './fission.ts';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-specdocs-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));

let n = 0;
function specDir(files: Record<string, string>, withConfig = true): string {
  const dir = path.join(root, `p${n++}`, 'specs');
  fs.mkdirSync(dir, { recursive: true });
  if (withConfig) fs.writeFileSync(path.join(dir, 'flint-deployment-config.yaml'), 'kind: DeploymentConfig\nname: p\nuid: 0f3c-uid\n');
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
  return dir;
}

const ENV = 'apiVersion: flint.dev/v1\nkind: Environment\nmetadata: {name: node}\nspec: {runtime: {image: flint/node-env}}\n';

describe('spec documents', () => {
  it("converts Fission's capitalized invoke strategy and drops its empty and zero fields", () => {
    const out = fromFission({
      apiVersion: 'fission.io/v1',
      kind: 'Function',
      metadata: { name: 'f', creationTimestamp: null },
      spec: {
        InvokeStrategy: { StrategyType: 'execution', ExecutionStrategy: { ExecutorType: 'newdeploy', MinScale: 0, MaxScale: 2, TargetCPUPercent: 0, SpecializationTimeout: 90 } },
        resources: {},
        secrets: [],
        package: { functionName: '', packageref: { name: 'p' } },
      },
      status: { anything: true },
    });
    assert.deepEqual(out, {
      apiVersion: 'flint.dev/v1',
      kind: 'Function',
      metadata: { name: 'f' },
      spec: {
        invokeStrategy: { strategyType: 'execution', executionStrategy: { executorType: 'newdeploy', minScale: 0, maxScale: 2, specializationTimeout: 90 } },
        package: { packageref: { name: 'p' } },
      },
    });
  });

  it('leaves Fission fields Flint does not know in place, so validation names them', () => {
    const dir = specDir({ 'env.yaml': 'apiVersion: fission.io/v1\nkind: Environment\nmetadata: {name: e}\nspec: {runtime: {image: fission/node-env}, allowedFunctionsPerContainer: infinite}\n' });
    assert.throws(() => readSpecs(dir), /env\.yaml: Environment 'e': spec\.allowedFunctionsPerContainer: unknown field/);
  });

  it('orders resources for applying and keeps archive:// references for the CLI to fill', () => {
    const dir = specDir({
      'a.yaml': `apiVersion: flint.dev/v1
kind: Function
metadata: {name: f}
spec: {environment: {name: node}, package: {packageref: {name: p}}}
---
apiVersion: flint.dev/v1
kind: Package
metadata: {name: p}
spec: {environment: {name: node}, deployment: {type: url, url: "archive://code"}}
---
kind: ArchiveUploadSpec
name: code
include: [src/*.js]
`,
      'b.yml': ENV,
    });
    const set = readSpecs(dir);
    assert.deepEqual(
      set.resources.map((r) => r.resource.kind),
      ['Environment', 'Package', 'Function'],
    );
    const pkg = set.resources[1].resource;
    assert.equal(pkg.kind === 'Package' && pkg.spec.deployment?.url, 'archive://code');
    assert.deepEqual(set.deployment, { name: 'p', uid: '0f3c-uid' });
    assert.deepEqual(set.warnings, []);
  });

  it('warns about references the specs do not define, and refuses duplicates and a missing deployment config', () => {
    const dir = specDir({ 'f.yaml': 'apiVersion: flint.dev/v1\nkind: Function\nmetadata: {name: f}\nspec: {environment: {name: node}, package: {packageref: {name: elsewhere}}}\n' });
    assert.match(readSpecs(dir).warnings.join('\n'), /package 'elsewhere' is not in the specs; it must exist on the server/);
    assert.throws(() => readSpecs(specDir({ 'a.yaml': ENV, 'b.yaml': ENV })), /b\.yaml: Environment 'node' is also defined in specs\/a\.yaml/);
    assert.throws(() => readSpecs(specDir({ 'a.yaml': ENV }, false)), /no DeploymentConfig \(run 'flint spec init'\)/);
    assert.throws(() => readSpecs(specDir({ 'a.yaml': 'kind: [unclosed' })), /a\.yaml: not valid YAML/);
  });

  it('collects archive files by glob, whole directories included, minus the excluded ones', () => {
    const proj = path.join(root, 'globs');
    for (const f of ['src/a.js', 'src/b.js', 'src/b.test.js', 'lib/deep/c.json', 'README.md']) {
      fs.mkdirSync(path.dirname(path.join(proj, f)), { recursive: true });
      fs.writeFileSync(path.join(proj, f), f);
    }
    const spec = { name: 'x', include: ['src/*.js', 'lib'], exclude: ['**/*.test.js'], where: 'here' };
    assert.deepEqual(archiveFiles(proj, spec), ['lib/deep/c.json', 'src/a.js', 'src/b.js']);
    assert.throws(() => archiveFiles(proj, { ...spec, include: ['nothing/*'] }), /here: ArchiveUploadSpec 'x' matches no files/);
  });
});
