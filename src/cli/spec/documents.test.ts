import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { isZipBuffer } from '../../archive/index.ts';
import { rawZip } from '../../archive/testing.ts';
import type { Ctx } from '../io.ts';
import { archiveFiles, buildArchives } from './apply.ts';
import { readSpecs } from './documents.ts';
import { fromFission } from './fission.ts';
import type { MessageQueueTrigger } from '../../api/kinds.ts';
import { validateResource } from '../../api/validate.ts';

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

  it("reads Fission's CanaryConfig as `fission canary create --spec` writes it, applied after the routes", () => {
    const dir = specDir({
      'canary.yaml': [
        'apiVersion: fission.io/v1',
        'kind: CanaryConfig',
        'metadata: {name: c, namespace: default, creationTimestamp: null}',
        'spec: {trigger: r, newfunction: v2, oldfunction: v1, weightincrement: 25, duration: 1m, failurethreshold: 0, failureType: status-code}',
        'status: {status: pending}',
      ].join('\n'),
      'route.yaml': 'apiVersion: fission.io/v1\nkind: HTTPTrigger\nmetadata: {name: r}\nspec: {relativeurl: /r, functionref: {type: function-weights, functionweights: {v1: 100, v2: 0}}}\n',
    });
    const set = readSpecs(dir);
    assert.deepEqual(
      set.resources.map((r) => r.resource.kind),
      ['HTTPTrigger', 'CanaryConfig'],
    );
    const cc = set.resources[1].resource;
    assert.deepEqual(cc.kind === 'CanaryConfig' && { apiVersion: cc.apiVersion, spec: cc.spec, status: cc.status }, {
      apiVersion: 'flint.dev/v1',
      spec: { trigger: 'r', newfunction: 'v2', oldfunction: 'v1', weightincrement: 25, duration: '1m', failurethreshold: 0, failureType: 'status-code' },
      status: undefined,
    });
    const bad = specDir({ 'canary.yaml': 'apiVersion: fission.io/v1\nkind: CanaryConfig\nmetadata: {name: c}\nspec: {trigger: r, newfunction: v2, oldfunction: v1, duration: 2d}\n' });
    assert.throws(() => readSpecs(bad), /specs\/canary\.yaml: CanaryConfig 'c': spec\.duration: '2d' is not a duration/);
  });

  it("keeps the user's own maps as written: data, labels, env", () => {
    const out = fromFission({
      apiVersion: 'fission.io/v1',
      kind: 'ConfigMap',
      metadata: { name: 'c', creationTimestamp: null, labels: { tier: '' } },
      data: { EMPTY_FLAG: '', MaxScale: '3' },
    });
    assert.deepEqual(out, { apiVersion: 'flint.dev/v1', kind: 'ConfigMap', metadata: { name: 'c', labels: { tier: '' } }, data: { EMPTY_FLAG: '', MaxScale: '3' } });
  });

  it("takes a message-queue trigger as `fission mqt create --spec` writes it, KEDA fields and all", () => {
    const doc = fromFission({
      apiVersion: 'fission.io/v1',
      kind: 'MessageQueueTrigger',
      metadata: { name: 'kafkatest', namespace: 'default', creationTimestamp: null },
      spec: {
        contentType: 'application/json',
        cooldownPeriod: 300,
        errorTopic: 'error',
        functionref: { functionweights: null, name: 'consumer', type: 'name' },
        maxReplicaCount: 100,
        maxRetries: 3,
        messageQueueType: 'kafka',
        metadata: { bootstrapServers: 'my-cluster-kafka-brokers.kafka.svc:9092', consumerGroup: 'my-group', topic: 'input' },
        minReplicaCount: 0,
        mqtkind: 'keda',
        pollingInterval: 30,
        respTopic: 'output',
        secret: '',
        topic: 'input',
      },
    });
    const mqt = validateResource('MessageQueueTrigger', doc, {}) as MessageQueueTrigger;
    assert.deepEqual(
      [mqt.spec.mqtkind, mqt.spec.pollingInterval, mqt.spec.cooldownPeriod, mqt.spec.minReplicaCount, mqt.spec.maxReplicaCount, mqt.spec.metadata?.consumerGroup, mqt.spec.secret],
      ['keda', 30, 300, 0, 100, 'my-group', undefined],
    );
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
    assert.throws(
      () => readSpecs(specDir({ 'w.yaml': 'apiVersion: fission.io/v1\nkind: KubernetesWatchTrigger\nmetadata: {name: w, namespace: default}\nspec: {type: pod}\n' })),
      /w\.yaml.*KubernetesWatchTrigger: Flint has no kubewatch triggers/,
    );
    assert.throws(
      () => readSpecs(specDir({ 'a.yaml': 'kind: ArchiveUploadSpec\nname: up\ninclude: [x.js]\nrootdir: ../elsewhere\n' })),
      /ArchiveUploadSpec 'up': '\.\.\/elsewhere' leaves the project directory/,
    );
  });

  it('collects archive files by glob, whole directories included, minus the excluded ones', () => {
    const proj = path.join(root, 'globs');
    for (const f of ['src/a.js', 'src/b.js', 'src/b.test.js', 'lib/deep/c.json', 'README.md']) {
      fs.mkdirSync(path.dirname(path.join(proj, f)), { recursive: true });
      fs.writeFileSync(path.join(proj, f), f);
    }
    const spec = { name: 'x', include: ['src/*.js', 'lib'], exclude: ['**/*.test.js'], where: 'here' };
    assert.deepEqual(archiveFiles(proj, spec), ['lib/deep/c.json', 'src/a.js', 'src/b.js']);
    assert.deepEqual(archiveFiles(proj, { ...spec, exclude: ['lib'] }), ['src/a.js', 'src/b.js', 'src/b.test.js'], 'excluding a directory excludes what is under it');
    assert.throws(() => archiveFiles(proj, { ...spec, include: ['nothing/*'] }), /here: ArchiveUploadSpec 'x' matches no files/);
  });

  it('keeps everything outside the project out of an archive', () => {
    const base = path.join(root, 'escape');
    const proj = path.join(base, 'proj');
    fs.mkdirSync(path.join(proj, 'src'), { recursive: true });
    fs.mkdirSync(path.join(base, 'outside'), { recursive: true });
    fs.writeFileSync(path.join(base, 'outside', 'secret.txt'), 'secret');
    fs.writeFileSync(path.join(proj, 'src', 'a.js'), 'a');
    const spec = (include: string[]) => ({ name: 'x', include, exclude: [], where: 'here' });
    assert.throws(() => archiveFiles(proj, spec(['{..,src}/outside/secret.txt'])), /'\.\.\/outside\/secret\.txt' leaves the project directory/);
    fs.symlinkSync(path.join(base, 'outside', 'secret.txt'), path.join(proj, 'src', 'link.txt'));
    assert.throws(() => archiveFiles(proj, spec(['src'])), /'src\/link\.txt' is a symlink that leaves the project directory/);
    fs.rmSync(path.join(proj, 'src', 'link.txt'));
    fs.symlinkSync(proj, path.join(proj, 'src', 'loop'));
    assert.throws(() => archiveFiles(proj, spec(['src'])), /'src\/loop' is a symlink to a directory, which is not followed/);
    fs.rmSync(path.join(proj, 'src', 'loop'));
    fs.symlinkSync(path.join(proj, 'src', 'a.js'), path.join(proj, 'src', 'b.js'));
    assert.deepEqual(archiveFiles(proj, spec(['src'])), ['src/a.js', 'src/b.js'], 'a symlink to a file inside counts as that file');
  });

  it('zips a one-file archive used as a build source, and keeps it as the file when it is the deployment', async () => {
    const dir = specDir({
      'a.yaml': `${ENV}---
apiVersion: flint.dev/v1
kind: Package
metadata: {name: p}
spec: {environment: {name: node}, source: {type: url, url: "archive://one"}, deployment: {type: url, url: "archive://one"}}
---
kind: ArchiveUploadSpec
name: one
include: [main.py]
`,
    });
    fs.writeFileSync(path.join(path.dirname(dir), 'main.py'), 'def main():\n    return "hi"\n');
    const ctx = { client: () => assert.fail('small archives are embedded, not uploaded') } as unknown as Ctx;
    const built = await buildArchives(ctx, readSpecs(dir));
    const bytes = (key: string) => Buffer.from(built.get(key)?.literal ?? '', 'base64');
    assert.ok(isZipBuffer(bytes('source one')), 'the source is a zip');
    assert.equal(bytes('deployment one').toString(), 'def main():\n    return "hi"\n');
  });

  it('checks a zip taken as it is before anything is written, as the server would', async () => {
    const dir = specDir({
      'a.yaml': `${ENV}---
apiVersion: flint.dev/v1
kind: Package
metadata: {name: p}
spec: {environment: {name: node}, deployment: {type: url, url: "archive://evil"}}
---
kind: ArchiveUploadSpec
name: evil
include: [evil.zip]
`,
    });
    fs.writeFileSync(path.join(path.dirname(dir), 'evil.zip'), rawZip('../escape.txt', Buffer.from('x')));
    const ctx = { client: () => assert.fail('nothing is uploaded') } as unknown as Ctx;
    await assert.rejects(buildArchives(ctx, readSpecs(dir)), { code: 'FLINT_ERR_BAD_ARCHIVE' });
  });
});
