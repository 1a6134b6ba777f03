// The Helm chart on a real Kubernetes control plane (etcd, kube-apiserver
// with RBAC, the controller manager, the scheduler) whose one node is the
// project's node agent: `helm install` with authentication and the mesh on
// and no storage provisioner, the chart's own pod scheduled and Running on
// the node, a function deployed through that pod's controller and called
// through its router, `helm upgrade` to a changed values file under steady
// traffic through the router Service (the failed requests are counted), what
// Istio reads checked in the running cluster, and `helm uninstall` leaving
// only what docs/kubernetes.md says it keeps.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureHelm } from '../scripts/helm.ts';
import { type ControlPlane, startControlPlane } from '../scripts/kube/control-plane.ts';
import { type NodeAgent, startNodeAgent } from '../scripts/kube/node-agent.ts';
import { sandboxAvailable } from '../src/sandbox/bwrap.ts';
import { istioProblems } from './helpers/istio-requirements.ts';
import { CHART, FLINT_NAMESPACE, FUNCTION_NAMESPACE } from './helpers/kube-cluster.ts';
import { eventually, flintAsync } from './helpers/server.ts';

const usable = await sandboxAvailable();
const HELLO = 'hello from the chart\n';

/** What the node agent needs besides authentication and the mesh: no volume provisioner, pods on one network. */
const INSTALL_VALUES = `
authentication:
  enabled: true
enableIstio: true
chart:
  listenOnPodIP: true
  persistence:
    enabled: false
`;
/** The upgrade: a changed values file (a new ConfigMap, so a new pod). */
const UPGRADE_VALUES = `
authentication:
  enabled: true
  jwtExpiryTime: 600
enableIstio: true
logLevel: warn
chart:
  listenOnPodIP: true
  persistence:
    enabled: false
`;

describe('the Helm chart on a real control plane', { skip: !usable && 'bubblewrap is not usable here', timeout: 20 * 60_000 }, () => {
  let cp: ControlPlane;
  let agent: NodeAgent;
  let helm: string;
  let work: string;
  const clusterLog: string[] = [];
  let cli: { env: NodeJS.ProcessEnv };
  let routerToken = '';

  const diagnostics = () => clusterLog.slice(-60).join('\n');
  const run = (bin: string, args: string[]) =>
    new Promise<string>((resolve, reject) => {
      execFile(bin, args, { maxBuffer: 64 << 20, timeout: 5 * 60_000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`${path.basename(bin)} ${args.join(' ')}: ${stderr || err.message}\n--- cluster ---\n${diagnostics()}`));
        else resolve(stdout);
      });
    });
  const helmRun = (args: string[]) => run(helm, [...args, '--kubeconfig', cp.kubeconfig]);
  const kubectlJson = async (args: string[]) => JSON.parse(await cp.kubectl([...args, '-o', 'json']));
  const flintPods = async () => (await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'pods', '-l', 'app.kubernetes.io/name=flint'])).items as any[];
  const isReady = (p: any) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp && (p.status.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
  async function ok(args: string[]): Promise<string> {
    const r = await flintAsync(cli, args, { cwd: work });
    assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}\n--- cluster ---\n${diagnostics()}`);
    return r.stdout;
  }
  const routerService = () => {
    const address = agent.serviceAddress(FLINT_NAMESPACE, 'router', 80);
    assert.ok(address, 'the router Service is proxied on this machine');
    return `http://${address}`;
  };
  async function call(base: string): Promise<{ status: number; text: string }> {
    const res = await fetch(`${base}/hello`, { headers: { authorization: `Bearer ${routerToken}` } });
    return { status: res.status, text: await res.text() };
  }

  before(async () => {
    helm = ensureHelm();
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-chart-cluster-'));
    fs.writeFileSync(path.join(work, 'install.yaml'), INSTALL_VALUES);
    fs.writeFileSync(path.join(work, 'upgrade.yaml'), UPGRADE_VALUES);
    fs.writeFileSync(path.join(work, 'hello.js'), `module.exports = async () => ({ status: 200, body: ${JSON.stringify(HELLO)} });\n`);
    cp = await startControlPlane({ log: (l) => clusterLog.push(l) });
    agent = await startNodeAgent({ controlPlane: cp, log: (l) => clusterLog.push(l) });
  });

  after(async () => {
    await agent?.stop();
    await cp?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it("installs with authentication and the mesh on, without a storage provisioner, and runs its pod on the node agent", async () => {
    await helmRun(['install', 'flint', CHART, '--namespace', FLINT_NAMESPACE, '--create-namespace', '-f', path.join(work, 'install.yaml')]);
    await eventually(async () => (await flintPods()).some(isReady), "the chart's pod Running and Ready", 180_000);
    const [pod] = (await flintPods()).filter(isReady);
    assert.equal(pod.spec.nodeName, agent.nodeName);
    assert.deepEqual(agent.pods(), [`${FLINT_NAMESPACE}/${pod.metadata.name}`], 'the node agent runs it');
    assert.deepEqual(pod.spec.volumes.find((v: any) => v.name === 'data').emptyDir, {}, 'the data directory needs no volume');
    assert.deepEqual((await kubectlJson(['get', 'pvc', '-A'])).items, [], 'no PersistentVolumeClaim waits for a provisioner');
    const deployment = await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'deployment', 'flint']);
    assert.deepEqual(deployment.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
  });

  it("deploys a function through the pod's controller and calls it through the pod's router", async () => {
    const [pod] = (await flintPods()).filter(isReady);
    const ip = pod.status.podIP;
    const secret = await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'secret', 'router']);
    const password = Buffer.from(secret.data.password, 'base64').toString('utf8');
    cli = {
      env: {
        ...process.env,
        FLINT_URL: `http://${ip}:8888`,
        FLINT_ROUTER_URL: `http://${ip}:8080`,
        FLINT_USERNAME: 'admin',
        FLINT_PASSWORD: password,
        FLINT_DATA_DIR: path.join(work, 'no-data-dir'),
      },
    };
    await ok(['env', 'create', '--name', 'nodejs', '--image', 'ghcr.io/fission/node-env:latest', '--poolsize', '2']);
    await ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js']);
    await ok(['route', 'create', '--name', 'hello', '--url', '/hello', '--function', 'hello']);
    assert.equal(await ok(['fn', 'test', '--name', 'hello']), HELLO);
    routerToken = (await ok(['token', 'create', '--username', 'admin', '--password', password, '--ttl', '30m'])).trim();
    assert.deepEqual(await call(`http://${ip}:8080`), { status: 200, text: HELLO }, "through the pod's router");
    assert.deepEqual(await call(routerService()), { status: 200, text: HELLO }, 'through the router Service');
    const unauthenticated = await fetch(`http://${ip}:8080/hello`);
    assert.equal(unauthenticated.status, 401, 'authentication is on');
  });

  it('upgrades to a changed values file under steady traffic', async (t) => {
    const [before] = (await flintPods()).filter(isReady);
    const functionPods = async () => (await kubectlJson(['-n', FUNCTION_NAMESPACE, 'get', 'pods', '-l', 'functionName=hello'])).items.map((p: any) => p.metadata.name).sort();
    const servedBy = await functionPods();
    const base = routerService();
    let running = true;
    let served = 0;
    const failures: string[] = [];
    // Four clients, each one request after another on a keep-alive connection, through the router Service as any client in the cluster would call it.
    const client = async () => {
      while (running) {
        try {
          const r = await call(base);
          if (r.status === 200 && r.text === HELLO) served++;
          else failures.push(`${new Date().toISOString()} ${r.status} ${r.text.slice(0, 300)}`);
        } catch (err) {
          failures.push(`${new Date().toISOString()} ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const clients = [client(), client(), client(), client()];
    try {
      await eventually(async () => served >= 50, 'traffic flowing before the upgrade', 60_000);
      await helmRun(['upgrade', 'flint', CHART, '--namespace', FLINT_NAMESPACE, '-f', path.join(work, 'upgrade.yaml')]);
      await cp.kubectl(['-n', FLINT_NAMESPACE, 'rollout', 'status', 'deployment/flint', '--timeout=180s']);
      // The old pod drains (router.drainSeconds) and stops; traffic goes on until it is gone and a while after.
      await eventually(async () => !(await flintPods()).some((p) => p.metadata.name === before.metadata.name), 'the old pod gone', 120_000);
      const after = served;
      await eventually(async () => served >= after + 50, 'traffic served by the new pod alone', 60_000);
    } finally {
      running = false;
      await Promise.all(clients);
    }
    t.diagnostic(`helm upgrade under steady traffic: ${served} requests served, ${failures.length} failed`);
    assert.deepEqual(failures, [], `failed requests during helm upgrade (of ${served + failures.length})\n--- cluster ---\n${diagnostics()}`);
    const [now] = (await flintPods()).filter(isReady);
    assert.notEqual(now.metadata.name, before.metadata.name, 'a new pod');
    cli.env = { ...cli.env, FLINT_URL: `http://${now.status.podIP}:8888`, FLINT_ROUTER_URL: `http://${now.status.podIP}:8080` };
    assert.match((await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'configmap', 'flint-values'])).data['values.yaml'], /jwtExpiryTime: 600/);
    // The new control plane adopted the function's pod rather than specializing another (src/executor/kubernetes/adoption.ts).
    assert.deepEqual(await functionPods(), servedBy);
  });

  it('gives Istio what it reads, as its documentation asks', async () => {
    // An environment allowed out of the cluster: its pods opt out of the sidecar.
    await ok(['env', 'create', '--name', 'outbound', '--image', 'ghcr.io/fission/node-env:latest', '--poolsize', '1', '--externalnetwork']);
    await ok(['fn', 'create', '--name', 'fetcher', '--env', 'outbound', '--code', 'hello.js']);
    assert.equal(await ok(['fn', 'test', '--name', 'fetcher']), HELLO);
    const pods = async (ns: string) => (await kubectlJson(['-n', ns, 'get', 'pods'])).items.filter((p: any) => !p.metadata.deletionTimestamp);
    const services = async (ns: string) => (await kubectlJson(['-n', ns, 'get', 'services'])).items;
    const fnPods = await pods(FUNCTION_NAMESPACE);
    const fnServices = await services(FUNCTION_NAMESPACE);
    const outbound = (p: any) => p.metadata.labels?.environmentName === 'outbound';
    assert.ok(fnPods.some(outbound) && fnPods.some((p: any) => !outbound(p)), 'pods of both environments');
    assert.deepEqual(
      istioProblems(
        { namespace: await kubectlJson(['get', 'namespace', FUNCTION_NAMESPACE]), services: fnServices, pods: fnPods },
        // Generic pool pods belong to no Service until a function claims them (Fission's layout); a claimed one must.
        { injected: (p) => !outbound(p), inService: (p) => p.metadata.labels?.managed === 'false' },
      ),
      [],
    );
    // Each function running in a pool pod has its Service, fronting exactly its pod.
    for (const name of ['hello', 'fetcher']) {
      const svc = fnServices.find((s: any) => s.metadata.name === `istio-${name}-default`);
      assert.ok(svc, `Service istio-${name}-default`);
      const fronted = fnPods.filter((p: any) => Object.entries(svc.spec.selector).every(([k, v]) => p.metadata.labels?.[k] === v));
      assert.deepEqual(fronted.map((p: any) => p.metadata.labels.functionName), [name]);
    }
    // The control plane's own namespace: its Services name their protocol (it takes no injection label from Flint).
    const cpProblems = istioProblems(
      { namespace: { metadata: { name: FLINT_NAMESPACE, labels: { 'istio-injection': 'enabled' } } }, services: await services(FLINT_NAMESPACE), pods: await pods(FLINT_NAMESPACE) },
      { injected: () => true, inService: () => true },
    );
    assert.deepEqual(cpProblems, []);
  });

  it('uninstalls, leaving only what the documentation says is kept', async () => {
    await helmRun(['uninstall', 'flint', '--namespace', FLINT_NAMESPACE, '--wait', '--timeout', '5m']);
    await eventually(async () => !(await kubectlJson(['get', 'namespaces'])).items.some((n: any) => n.metadata.name === FUNCTION_NAMESPACE), 'the function namespace gone', 300_000);
    await eventually(async () => agent.pods().length === 0, 'no pod left on the node', 120_000);
    const kinds = 'deployments,replicasets,pods,services,configmaps,secrets,serviceaccounts,roles,rolebindings,ingresses,persistentvolumeclaims';
    const left = (await kubectlJson(['get', kinds, '--all-namespaces'])).items
      .filter((o: any) => o.metadata.namespace === FLINT_NAMESPACE || JSON.stringify(o.metadata.labels ?? {}).includes('flint'))
      .map((o: any) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`)
      .sort();
    // docs/kubernetes.md, "What helm uninstall keeps": the namespace --create-namespace made, the router's credentials,
    // and what Kubernetes puts in every namespace.
    assert.deepEqual(left, [`ConfigMap ${FLINT_NAMESPACE}/kube-root-ca.crt`, `Secret ${FLINT_NAMESPACE}/router`, `ServiceAccount ${FLINT_NAMESPACE}/default`]);
    const cluster = (await kubectlJson(['get', 'clusterroles,clusterrolebindings,namespaces,customresourcedefinitions'])).items
      .filter((o: any) => o.metadata.name.includes('flint'))
      .map((o: any) => `${o.kind} ${o.metadata.name}`)
      .sort();
    assert.deepEqual(cluster, [
      'CustomResourceDefinition environments.flint.dev',
      'CustomResourceDefinition functions.flint.dev',
      'CustomResourceDefinition httptriggers.flint.dev',
      'CustomResourceDefinition messagequeuetriggers.flint.dev',
      'CustomResourceDefinition packages.flint.dev',
      `Namespace ${FLINT_NAMESPACE}`,
    ]);
    // The custom resources stay with their definitions: a reinstall finds the functions again.
    const fns = (await kubectlJson(['-n', 'default', 'get', 'functions.flint.dev'])).items.map((f: any) => f.metadata.name).sort();
    assert.deepEqual(fns, ['fetcher', 'hello']);
  });
});
