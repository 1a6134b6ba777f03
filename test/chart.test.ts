// The Helm chart, rendered by a real helm: it lints, the values it hands
// `flint server` pass Flint's own checks, the controller, the executor and
// the routers run as three Deployments that the Services tell apart, the
// router autoscaler appears only when asked for, the mesh option labels the
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

/** The Deployment of each component, by its name. */
const DEPLOYMENTS = { controller: 'flint', executor: 'flint-executor', router: 'flint-router' } as const;
type Component = keyof typeof DEPLOYMENTS;
const COMPONENTS = Object.keys(DEPLOYMENTS) as Component[];

const container = (docs: any[], component: Component) => find(docs, 'Deployment', DEPLOYMENTS[component]).spec.template.spec.containers[0];
const selects = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels?.[k] === v);
/** The args of a component's container as the kubelet expands them, given the pod's IP. */
const expanded = (args: string[], ip: string) => args.filter((a) => a.includes('=')).map((a) => a.replaceAll('$(POD_IP)', ip));

async function loadRendered(docs: any[], sets: string[] = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-chart-'));
  try {
    fs.writeFileSync(path.join(dir, 'values.yaml'), find(docs, 'ConfigMap', 'flint-values').data['values.yaml']);
    return await loadValues({ files: [path.join(dir, 'values.yaml')], sets });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('Helm chart', { timeout: 25 * 60_000 }, () => {
  before(() => {
    helm = ensureHelm();
  });

  it('lints, with the mesh off and on, and with the router autoscaler', () => {
    for (const sets of [[], ['enableIstio=true', 'authentication.enabled=true'], ['router.autoscaling.enabled=true', 'chart.listenOnPodIP=true', 'chart.persistence.enabled=false']]) {
      const r = spawnSync(helm, ['lint', CHART, '--namespace', 'flint', ...sets.flatMap((s) => ['--set', s])], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stdout + r.stderr);
    }
  });

  it('hands flint server values that Flint itself accepts, in kubernetes mode on the pod\'s address', async () => {
    const docs = render(['enableIstio=true', 'kafka.enabled=true', 'kafka.brokers=kafka.kafka:9092']);
    const values = await loadRendered(docs);
    assert.equal(values.mode, 'kubernetes');
    assert.equal(values.enableIstio, true);
    assert.equal(values.controller.host, '0.0.0.0');
    assert.equal(values.router.host, '0.0.0.0');
    assert.equal(values.executor.host, '0.0.0.0');
    assert.equal(values.ingress.provider, 'kubernetes');
    assert.equal(values.kubernetes.controllerUrl, 'http://controller.flint.svc.cluster.local');
    assert.equal(values.kubernetes.routerUrl, 'http://router.flint.svc.cluster.local');
    assert.equal(values.kafka.brokers, 'kafka.kafka:9092');
    // Addresses given are kept.
    const given = await loadRendered(render(['kubernetes.routerUrl=http://routers.example:8080', 'kubernetes.controllerUrl=http://cp.example']));
    assert.equal(given.kubernetes.routerUrl, 'http://routers.example:8080');
    assert.equal(given.kubernetes.controllerUrl, 'http://cp.example');
    for (const component of COMPONENTS) {
      const c = container(docs, component);
      assert.equal(c.image, 'ghcr.io/flint/flint:0.1.0');
      assert.deepEqual(c.args.slice(0, 5), ['server', '-f', '/etc/flint/values.yaml', '--set', `role=${component}`], component);
      assert.deepEqual(c.env, [
        { name: 'ENABLE_ISTIO', value: 'true' },
        { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      ]);
      // Each role's values, as its pod runs them, pass Flint's checks.
      const own = await loadRendered(docs, expanded(c.args, '10.1.2.3'));
      assert.equal(own.role, component);
    }
    // The executor's leader tells the routers its pod's IP, whether or not it listens on it alone.
    assert.deepEqual(container(docs, 'executor').args.slice(5), ['--set', 'executor.advertiseHost=$(POD_IP)']);
    assert.equal((await loadRendered(docs, expanded(container(docs, 'executor').args, '10.1.2.3'))).executor.advertiseHost, '10.1.2.3');
    assert.deepEqual(container(docs, 'controller').args, ['server', '-f', '/etc/flint/values.yaml', '--set', 'role=controller']);
    assert.deepEqual(container(docs, 'router').args, ['server', '-f', '/etc/flint/values.yaml', '--set', 'role=router']);
    assert.equal(find(docs, 'Service', 'router').spec.ports[0].port, 80);
  });

  it('runs the controller, the executor and the routers as three Deployments, each Service selecting its own pods', () => {
    const docs = render();
    const deployments = docs.filter((d) => d.kind === 'Deployment');
    assert.deepEqual(deployments.map((d) => d.metadata.name).sort(), Object.values(DEPLOYMENTS).sort());
    for (const component of COMPONENTS) {
      const d = find(docs, 'Deployment', DEPLOYMENTS[component]);
      const selector = d.spec.selector.matchLabels;
      assert.deepEqual(selector, { 'app.kubernetes.io/name': 'flint', 'app.kubernetes.io/instance': 'flint', 'app.kubernetes.io/component': component });
      assert.ok(selects(selector, d.spec.template.metadata.labels), `${component}: the Deployment selects its own pods`);
      // No Deployment's selector takes another's pods.
      for (const other of deployments) if (other !== d) assert.ok(!selects(selector, other.spec.template.metadata.labels), `${component} selects ${other.metadata.name}'s pods`);
      assert.equal(d.metadata.labels['app.kubernetes.io/component'], component);
    }
    // Each Service fronts one component, on a port its pods name.
    for (const [service, component, port] of [
      ['router', 'router', 'http-router'],
      ['controller', 'controller', 'http-controller'],
      ['executor', 'executor', 'http-executor'],
    ] as const) {
      const svc = find(docs, 'Service', service);
      const fronted = deployments.filter((d) => selects(svc.spec.selector, d.spec.template.metadata.labels)).map((d) => d.metadata.name);
      assert.deepEqual(fronted, [DEPLOYMENTS[component]], `Service ${service}`);
      assert.equal(svc.spec.ports[0].targetPort, port);
      assert.ok(container(docs, component).ports.some((p: any) => p.name === port), `${component} names port ${port}`);
    }
    // The routers reach the executor's leader through its Lease, not through a Service that would balance over standbys.
    assert.equal(find(docs, 'Service', 'executor').spec.clusterIP, 'None');
    assert.equal(container(docs, 'executor').ports[0].containerPort, 8889);
    // Replicas: one controller (one writer of the data directory), the executor's and the routers' from the values.
    const replicas = (d: any[]) => COMPONENTS.map((c) => find(d, 'Deployment', DEPLOYMENTS[c]).spec.replicas);
    assert.deepEqual(replicas(docs), [1, 2, 2]);
    assert.deepEqual(replicas(render(['executor.replicas=3', 'router.replicas=5'])), [1, 3, 5]);
    // Probes: the controller's API; every executor replica, leader or standby, answers /healthz; a router's own health, which fails while it drains.
    const probe = (component: Component, kind: string) => container(docs, component)[kind]?.httpGet;
    assert.deepEqual(probe('controller', 'readinessProbe'), { path: '/healthz', port: 'http-controller' });
    assert.deepEqual(probe('controller', 'livenessProbe'), { path: '/healthz', port: 'http-controller' });
    assert.deepEqual(probe('executor', 'readinessProbe'), { path: '/healthz', port: 'http-executor' });
    assert.deepEqual(probe('router', 'readinessProbe'), { path: '/router-healthz', port: 'http-router' });
    // An autoscaler measures CPU against a request.
    assert.equal(container(docs, 'router').resources.requests.cpu, '100m');
    // Only the controller keeps a data directory; the others' is gone with the pod, and they roll with no downtime.
    for (const component of ['executor', 'router'] as const) {
      const d = find(docs, 'Deployment', DEPLOYMENTS[component]);
      assert.deepEqual(d.spec.template.spec.volumes.find((v: any) => v.name === 'data'), { name: 'data', emptyDir: {} });
      assert.deepEqual(d.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    }
    // A changed values file restarts every component; a replica count restarts nothing.
    const checksums = (d: any[]) => [...new Set(COMPONENTS.map((c) => find(d, 'Deployment', DEPLOYMENTS[c]).spec.template.metadata.annotations['checksum/values']))];
    const [base] = checksums(docs);
    assert.equal(checksums(docs).length, 1);
    assert.deepEqual(checksums(render(['router.replicas=3', 'executor.replicas=4', 'router.autoscaling.enabled=true'])), [base]);
    const changed = checksums(render(['logLevel=warn']));
    assert.equal(changed.length, 1);
    assert.notEqual(changed[0], base);
  });

  it('scales the routers with a HorizontalPodAutoscaler only when router.autoscaling.enabled', () => {
    assert.deepEqual(render().filter((d) => d.kind === 'HorizontalPodAutoscaler'), []);
    const docs = render(['router.autoscaling.enabled=true', 'router.autoscaling.minReplicas=3', 'router.autoscaling.maxReplicas=7', 'router.autoscaling.targetCPUUtilizationPercentage=60']);
    const hpas = docs.filter((d) => d.kind === 'HorizontalPodAutoscaler');
    assert.equal(hpas.length, 1);
    const [hpa] = hpas;
    assert.equal(hpa.apiVersion, 'autoscaling/v2');
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'flint-router' });
    assert.equal(hpa.spec.minReplicas, 3);
    assert.equal(hpa.spec.maxReplicas, 7);
    assert.deepEqual(hpa.spec.metrics, [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 60 } } }]);
    // The autoscaler owns the count: an upgrade must not reset it.
    assert.equal(find(docs, 'Deployment', 'flint-router').spec.replicas, undefined);
    const r = spawnSync(helm, ['template', 'flint', CHART, '--namespace', 'flint', '--set', 'router.autoscaling.enabled=true', '--set', 'router.autoscaling.minReplicas=5', '--set', 'router.autoscaling.maxReplicas=2'], { encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /router\.autoscaling\.minReplicas \(5\) is more than router\.autoscaling\.maxReplicas \(2\)/);
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
    // A router's grace period: long enough for its drain and the requests under way.
    const grace = (docs: any[]) => find(docs, 'Deployment', 'flint-router').spec.template.spec.terminationGracePeriodSeconds;
    assert.equal(grace(off), 35);
    assert.equal(grace(render(['router.drainSeconds=12'])), 42);
  });

  it("listens on the pod's IP only with chart.listenOnPodIP, with values flint server accepts", async () => {
    for (const component of COMPONENTS) assert.ok(!container(render(), component).args.some((a: string) => a.endsWith('.host=$(POD_IP)')), component);
    const docs = render(['chart.listenOnPodIP=true']);
    for (const [component, listener] of [
      ['controller', 'controller'],
      ['executor', 'executor'],
      ['router', 'router'],
    ] as const) {
      const c = container(docs, component);
      assert.deepEqual(c.args.slice(5, 7), ['--set', `${listener}.host=$(POD_IP)`], component);
      assert.deepEqual(c.env.find((e: any) => e.name === 'POD_IP'), { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } });
      // As the kubelet expands $(POD_IP).
      const values = await loadRendered(docs, expanded(c.args, '10.1.2.3'));
      assert.equal(values.role, component);
      assert.equal(values[listener].host, '10.1.2.3');
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
    assert.ok(grants(cluster.rules, 'flint.dev', 'canaryconfigs/status').includes('update'));
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
    // Leader election: every elected component (the controller's and the executor's pods run as flint) holds or waits for a Lease here.
    const leases = find(docs, 'Role', 'flint-leader-election');
    assert.equal(leases.metadata.namespace, 'flint');
    assert.deepEqual(grants(leases.rules, 'coordination.k8s.io', 'leases').sort(), ['create', 'get', 'list', 'update', 'watch']);
    const boundTo = (kind: string, role: string) =>
      docs
        .filter((d) => d.kind === `${kind}Binding` && d.roleRef.kind === kind && d.roleRef.name === role)
        .flatMap((d) => d.subjects.map((s: any) => `${d.metadata.namespace ?? ''}:${s.namespace}/${s.name}`));
    assert.deepEqual(boundTo('Role', 'flint-leader-election'), ['flint:flint/flint']);
    // The canary controller (in the executor's pods) finds the router pods to read their counters: read only.
    const canary = find(docs, 'Role', 'flint-canary');
    assert.equal(canary.metadata.namespace, 'flint');
    assert.deepEqual(canary.rules, [
      { apiGroups: [''], resources: ['services'], resourceNames: ['router'], verbs: ['get'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
    ]);
    assert.deepEqual(boundTo('Role', 'flint-canary'), ['flint:flint/flint']);
    for (const c of ['controller', 'executor'] as const) assert.equal(find(docs, 'Deployment', DEPLOYMENTS[c]).spec.template.spec.serviceAccountName, 'flint');
    // The routers run as their own ServiceAccount, which reads and writes nothing else.
    assert.equal(find(docs, 'Deployment', 'flint-router').spec.template.spec.serviceAccountName, 'flint-router');
    find(docs, 'ServiceAccount', 'flint-router');
    const routerCluster = find(docs, 'ClusterRole', 'flint-router-flint');
    assert.deepEqual(boundTo('ClusterRole', 'flint-router-flint'), [':flint/flint-router']);
    // Its store follows routes and functions only (KubeStoreOptions.follow): nothing else, and no Secret or ConfigMap cluster-wide.
    assert.deepEqual(routerCluster.rules, [{ apiGroups: ['flint.dev'], resources: ['functions', 'httptriggers'], verbs: ['get', 'list', 'watch'] }]);
    const routerRole = find(docs, 'Role', 'flint-router');
    assert.equal(routerRole.metadata.namespace, 'flint');
    assert.deepEqual(boundTo('Role', 'flint-router'), ['flint:flint/flint-router']);
    const secretRules = routerRole.rules.filter((r: any) => r.resources.includes('secrets'));
    assert.deepEqual(secretRules, [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['router', 'executor'], verbs: ['get', 'list', 'watch'] }]);
    assert.deepEqual(grants(routerRole.rules, 'coordination.k8s.io', 'leases').sort(), ['get', 'list', 'watch']);
    // No other role is bound to the routers' account.
    const routerBindings = docs.filter((d) => d.kind?.endsWith('Binding') && d.subjects.some((s: any) => s.name === 'flint-router')).map((d) => d.roleRef.name).sort();
    assert.deepEqual(routerBindings, ['flint-router', 'flint-router-flint']);
    for (const rule of [...routerCluster.rules, ...routerRole.rules]) assert.deepEqual(rule.verbs.filter((v: string) => !['get', 'list', 'watch'].includes(v)), []);
    // Nothing else: no pods/exec, no cluster-wide pods, no wildcard.
    for (const role of [cluster, executor, ingress, leases, routerCluster, routerRole]) for (const rule of role.rules) assert.ok(!rule.resources.includes('*') && !rule.verbs.includes('*'));
  });
});
