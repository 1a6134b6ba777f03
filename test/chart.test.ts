// The Helm chart, rendered by a real helm: it lints, the values it hands
// `flint server` pass Flint's own checks, the mesh option labels the
// function namespace, bad values are refused at install time naming the key,
// and its RBAC grants what the code calls.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { CUSTOM_KINDS } from '../src/api/crds.ts';
import { KINDS } from '../src/api/kinds.ts';
import { loadValues } from '../src/config/values.ts';
import { renderValuesSchema, VALUES_SCHEMA_FILE } from '../src/config/values-schema.ts';
import { ensureHelm } from '../scripts/helm.ts';
import { REPO } from './helpers/server.ts';

const CHART = path.join(REPO, 'charts', 'flint');
let helm = '';

function render(sets: string[] = [], extra: string[] = []): any[] {
  const out = execFileSync(helm, ['template', 'flint', CHART, '--namespace', 'flint', ...extra, ...sets.flatMap((s) => ['--set', s])], { encoding: 'utf8' });
  return parseAllDocuments(out)
    .map((d) => d.toJS())
    .filter(Boolean);
}

function find(docs: any[], kind: string, name: string): any {
  const doc = docs.find((d) => d.kind === kind && d.metadata.name === name);
  assert.ok(doc, `the chart renders ${kind} ${name}`);
  return doc;
}

describe('Helm chart', { timeout: 25 * 60_000 }, () => {
  before(() => {
    helm = ensureHelm();
  });

  it('lints, with the mesh off and on', () => {
    for (const sets of [[], ['enableIstio=true', 'authentication.enabled=true']]) {
      const r = spawnSync(helm, ['lint', CHART, '--namespace', 'flint', ...sets.flatMap((s) => ['--set', s])], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stdout + r.stderr);
    }
  });

  it('hands flint server values that Flint itself accepts, in kubernetes mode on the pod\'s address', async () => {
    const docs = render(['enableIstio=true', 'kafka.enabled=true', 'kafka.brokers=kafka.kafka:9092']);
    const text = find(docs, 'ConfigMap', 'flint-values').data['values.yaml'];
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-chart-'));
    try {
      fs.writeFileSync(path.join(dir, 'values.yaml'), text);
      const values = await loadValues({ files: [path.join(dir, 'values.yaml')] });
      assert.equal(values.mode, 'kubernetes');
      assert.equal(values.enableIstio, true);
      assert.equal(values.controller.host, '0.0.0.0');
      assert.equal(values.router.host, '0.0.0.0');
      assert.equal(values.ingress.provider, 'kubernetes');
      assert.equal(values.kubernetes.controllerUrl, 'http://controller.flint.svc.cluster.local');
      assert.equal(values.kafka.brokers, 'kafka.kafka:9092');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const deployment = find(docs, 'Deployment', 'flint');
    const container = deployment.spec.template.spec.containers[0];
    assert.deepEqual(container.args, ['server', '-f', '/etc/flint/values.yaml']);
    assert.equal(container.image, 'ghcr.io/flint/flint:0.1.0');
    assert.deepEqual(container.env, [{ name: 'ENABLE_ISTIO', value: 'true' }]);
    assert.equal(find(docs, 'Service', 'router').spec.ports[0].port, 80);
  });

  it('refuses a release namespace other than flint, saying why', () => {
    const r = spawnSync(helm, ['template', 'flint', CHART, '--namespace', 'other'], { encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /install Flint into namespace flint, not "other"/);
  });

  it('labels the function namespace for Istio injection only with enableIstio', () => {
    const off = find(render(), 'Namespace', 'flint-function');
    assert.equal(off.metadata.labels['istio-injection'], undefined);
    const on = find(render(['enableIstio=true']), 'Namespace', 'flint-function');
    assert.equal(on.metadata.labels['istio-injection'], 'enabled');
    const moved = find(render(['enableIstio=true', 'kubernetes.functionNamespace=fns']), 'Namespace', 'fns');
    assert.equal(moved.metadata.labels['istio-injection'], 'enabled');
  });

  it('refuses a bad value at install time, naming it, as flint server would', () => {
    for (const [set, re] of [
      ['router.port=abc', /router\.port: Invalid type/],
      ['routerr.port=1', /routerr/],
      ['chart.routerServiceType=Ingress', /chart\.routerServiceType/],
    ] as const) {
      const r = spawnSync(helm, ['template', 'flint', CHART, '--set', set], { encoding: 'utf8' });
      assert.notEqual(r.status, 0, set);
      assert.match(r.stderr, re);
    }
    assert.equal(fs.readFileSync(VALUES_SCHEMA_FILE, 'utf8'), renderValuesSchema(), 'values.schema.json is stale: run npm run generate');
  });

  it('installs the CRDs and grants what the store, the executor and the ingress provider call', () => {
    const docs = render([], ['--include-crds']);
    const crds = docs.filter((d) => d.kind === 'CustomResourceDefinition').map((d) => d.metadata.name);
    assert.deepEqual(crds.sort(), CUSTOM_KINDS.map((k) => `${KINDS[k].plural}.flint.dev`).sort());
    const cluster = find(docs, 'ClusterRole', 'flint-flint');
    const grants = (rules: any[], group: string, resource: string) =>
      rules.filter((r) => r.apiGroups.includes(group) && r.resources.includes(resource)).flatMap((r) => r.verbs);
    const all = ['get', 'list', 'watch', 'create', 'update', 'delete'];
    for (const kind of CUSTOM_KINDS) assert.deepEqual(grants(cluster.rules, 'flint.dev', KINDS[kind].plural).sort(), [...all].sort(), kind);
    assert.ok(grants(cluster.rules, 'flint.dev', 'packages/status').includes('update'));
    for (const r of ['secrets', 'configmaps']) assert.deepEqual(grants(cluster.rules, '', r).sort(), [...all].sort(), r);
    // Namespaces: read only, and only the two the server writes into.
    const nsRule = cluster.rules.find((r: any) => r.resources.includes('namespaces'));
    assert.deepEqual(nsRule.verbs, ['get']);
    assert.deepEqual(nsRule.resourceNames, ['flint', 'flint-function']);
    const executor = find(docs, 'Role', 'flint-executor');
    assert.equal(executor.metadata.namespace, 'flint-function');
    for (const [g, r] of [
      ['', 'pods'],
      ['', 'services'],
    ]) {
      assert.deepEqual(grants(executor.rules, g, r).sort(), [...all].sort(), r);
    }
    // Server-side apply is a patch.
    assert.deepEqual(grants(executor.rules, 'apps', 'deployments').sort(), [...all, 'patch'].sort());
    assert.deepEqual(grants(executor.rules, '', 'pods/log'), ['get']);
    const ingress = find(docs, 'Role', 'flint-ingress');
    assert.ok(grants(ingress.rules, 'networking.k8s.io', 'ingresses').includes('create'));
    // Nothing else: no pods/exec, no cluster-wide pods, no wildcard.
    for (const role of [cluster, executor, ingress]) for (const rule of role.rules) assert.ok(!rule.resources.includes('*') && !rule.verbs.includes('*'));
  });
});
