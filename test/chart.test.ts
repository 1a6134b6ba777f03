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

  it('keeps the data directory on a claim by default, and needs no storage provisioner without persistence, then rolling its upgrades', () => {
    const volume = (docs: any[]) => find(docs, 'Deployment', 'flint').spec.template.spec.volumes.find((v: any) => v.name === 'data');
    const claims = (docs: any[]) => docs.filter((d) => d.kind === 'PersistentVolumeClaim').map((d) => d.metadata.name);
    const byDefault = render();
    assert.deepEqual(claims(byDefault), ['flint-data']);
    assert.equal(volume(byDefault).persistentVolumeClaim.claimName, 'flint-data');
    // One writer of a ReadWriteOnce claim: the old pod goes first.
    assert.deepEqual(find(byDefault, 'Deployment', 'flint').spec.strategy, { type: 'Recreate' });
    const existing = render(['chart.persistence.existingClaim=made-by-hand']);
    assert.deepEqual(claims(existing), []);
    assert.equal(volume(existing).persistentVolumeClaim.claimName, 'made-by-hand');
    const off = render(['chart.persistence.enabled=false']);
    assert.deepEqual(claims(off), []);
    assert.deepEqual(volume(off).emptyDir, {});
    const deployment = find(off, 'Deployment', 'flint');
    assert.deepEqual(deployment.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    // Long enough for the router's drain and the components' own stop.
    assert.equal(deployment.spec.template.spec.terminationGracePeriodSeconds, 35);
    assert.equal(find(render(['router.drainSeconds=12']), 'Deployment', 'flint').spec.template.spec.terminationGracePeriodSeconds, 42);
  });

  it("listens on the pod's IP only with chart.listenOnPodIP, with values flint server accepts", async () => {
    const container = (docs: any[]) => find(docs, 'Deployment', 'flint').spec.template.spec.containers[0];
    assert.deepEqual(container(render()).args, ['server', '-f', '/etc/flint/values.yaml']);
    const docs = render(['chart.listenOnPodIP=true']);
    const c = container(docs);
    assert.deepEqual(c.args, ['server', '-f', '/etc/flint/values.yaml', '--set', 'controller.host=$(POD_IP)', '--set', 'router.host=$(POD_IP)']);
    assert.deepEqual(c.env.find((e: any) => e.name === 'POD_IP'), { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-chart-'));
    try {
      fs.writeFileSync(path.join(dir, 'values.yaml'), find(docs, 'ConfigMap', 'flint-values').data['values.yaml']);
      // As the kubelet expands $(POD_IP).
      const sets = c.args.filter((a: string) => a.includes('=')).map((a: string) => a.replace('$(POD_IP)', '10.1.2.3'));
      const values = await loadValues({ files: [path.join(dir, 'values.yaml')], sets });
      assert.equal(values.controller.host, '10.1.2.3');
      assert.equal(values.router.host, '10.1.2.3');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
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
