// The Helm chart on a real Kubernetes control plane (etcd, kube-apiserver
// with RBAC, the controller manager, the scheduler) whose one node is the
// project's node agent: `helm install` with authentication and the mesh on
// and no storage provisioner, the chart's controller, executor and router
// pods scheduled and Running on the node, a function deployed through the
// controller pod and called through a router pod, `helm upgrade` to a
// changed values file under steady traffic through the router Service (the
// failed requests are counted), three routers after `--set
// router.replicas=3` each answering on its own address, a standby executor
// taking over from a leader that stops and from one that dies, what Istio
// reads checked in the running cluster, and `helm uninstall` leaving only
// what docs/kubernetes.md says it keeps.
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
/** The upgrade: a changed values file (a new ConfigMap, so new pods for every component). */
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

type Component = 'controller' | 'executor' | 'router';
const DEPLOYMENTS: Record<Component, string> = { controller: 'flint', executor: 'flint-executor', router: 'flint-router' };
/** The chart's default replicas. */
const REPLICAS: Record<Component, number> = { controller: 1, executor: 2, router: 2 };
const COMPONENTS = Object.keys(DEPLOYMENTS) as Component[];

describe('the Helm chart on a real control plane', { skip: !usable && 'bubblewrap is not usable here', timeout: 30 * 60_000 }, () => {
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
  const flintPods = async (component?: Component) =>
    (await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'pods', '-l', component ? `app.kubernetes.io/component=${component}` : 'app.kubernetes.io/name=flint'])).items as any[];
  const isReady = (p: any) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp && (p.status.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
  const readyPods = async (component: Component) => (await flintPods(component)).filter(isReady);
  /** Waits until `component` has exactly `n` pods, all Ready and none terminating, and returns them. */
  const settled = (component: Component, n: number, timeoutMs = 180_000) =>
    eventually(
      async () => {
        const pods = await flintPods(component);
        return pods.length === n && pods.every(isReady) ? pods : undefined;
      },
      `${n} ${component} pod(s) Ready and no other`,
      timeoutMs,
      250,
    );
  const names = (pods: any[]) => pods.map((p) => p.metadata.name).sort();
  /** The Ready executor pod holding the Lease flint-executor (the holder identity starts with the pod's name), and that identity. */
  async function executorLeader(): Promise<{ pod: any; holder: string } | undefined> {
    const lease = await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'lease', 'flint-executor']).catch(() => undefined);
    const holder: string = lease?.spec?.holderIdentity ?? '';
    const pod = holder ? (await readyPods('executor')).find((p) => holder.startsWith(p.metadata.name)) : undefined;
    return pod && { pod, holder };
  }
  /** Waits for a leader other than `previous` (another process: after a crash, the restarted container is one too). */
  const newLeader = (previous: string, what: string) =>
    eventually(
      async () => {
        const l = await executorLeader();
        return l && l.holder !== previous ? l : undefined;
      },
      what,
      60_000,
      100,
    );
  const controllerUrl = async () => `http://${(await settled('controller', 1))[0].status.podIP}:8888`;
  const routerUrl = (pod: any) => `http://${pod.status.podIP}:8080`;
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

  it('installs with authentication and the mesh on, without a storage provisioner, and runs the controller, the executor and the routers on the node agent', async () => {
    await helmRun(['install', 'flint', CHART, '--namespace', FLINT_NAMESPACE, '--create-namespace', '-f', path.join(work, 'install.yaml')]);
    const pods: any[] = [];
    for (const component of COMPONENTS) pods.push(...(await settled(component, REPLICAS[component])));
    for (const pod of pods) assert.equal(pod.spec.nodeName, agent.nodeName);
    assert.deepEqual(agent.pods().sort(), pods.map((p) => `${FLINT_NAMESPACE}/${p.metadata.name}`).sort(), 'the node agent runs them');
    const [controller] = await readyPods('controller');
    assert.deepEqual(controller.spec.volumes.find((v: any) => v.name === 'data').emptyDir, {}, 'the data directory needs no volume');
    assert.deepEqual((await kubectlJson(['get', 'pvc', '-A'])).items, [], 'no PersistentVolumeClaim waits for a provisioner');
    const deployment = await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'deployment', 'flint']);
    assert.deepEqual(deployment.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    // One executor leads (through the Lease, which the chart's RBAC lets it take); the other stands by, Ready as well.
    const leader = await eventually(executorLeader, 'an executor pod holding the Lease flint-executor', 60_000, 250);
    assert.equal(leader.pod.metadata.labels['app.kubernetes.io/component'], 'executor');
    // The routers run as their own read-only ServiceAccount.
    for (const router of await readyPods('router')) assert.equal(router.spec.serviceAccountName, 'flint-router');
  });

  it('deploys a function through the controller pod and calls it through each router pod and the router Service', async () => {
    const routers = await readyPods('router');
    const secret = await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'secret', 'router']);
    const password = Buffer.from(secret.data.password, 'base64').toString('utf8');
    cli = {
      env: {
        ...process.env,
        FLINT_URL: await controllerUrl(),
        FLINT_ROUTER_URL: routerUrl(routers[0]),
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
    for (const router of routers) assert.deepEqual(await call(routerUrl(router)), { status: 200, text: HELLO }, `through router pod ${router.metadata.name}`);
    assert.deepEqual(await call(routerService()), { status: 200, text: HELLO }, 'through the router Service');
    const unauthenticated = await fetch(`${routerUrl(routers[1])}/hello`);
    assert.equal(unauthenticated.status, 401, 'authentication is on');
  });

  it("judges canaries by every router pod's counters, read by the executor's leader from the pods behind the router Service", async () => {
    const routers = await readyPods('router');
    assert.equal(routers.length, 2);
    fs.writeFileSync(path.join(work, 'flaky.js'), "let n = 0;\nmodule.exports = async () => (n++ % 2 ? { status: 500, body: 'boom' } : { status: 200, body: 'flaky' });\n");
    await ok(['fn', 'create', '--name', 'flaky', '--env', 'nodejs', '--code', 'flaky.js']);
    await ok(['fn', 'create', '--name', 'hello2', '--env', 'nodejs', '--code', 'hello.js']);
    const canary = async (name: string) => (await kubectlJson(['-n', 'default', 'get', 'canaryconfigs.flint.dev', name])).status ?? {};
    /** Requests through one router pod only, until the canary is done: the other router counts nothing. */
    async function rollout(name: string, fn: string, router: any, want: string) {
      await ok(['route', 'create', '--name', name, '--url', `/${name}`, '--function', 'hello', '--weight', '100', '--function', fn, '--weight', '0']);
      await ok(['canary', 'create', '--name', name, '--httptrigger', name, '--newfunction', fn, '--oldfunction', 'hello', '--increment-step', '50', '--increment-interval', '2s']);
      let done = false;
      const load = (async () => {
        while (!done) {
          await fetch(`${routerUrl(router)}/${name}`, { headers: { authorization: `Bearer ${routerToken}` } })
            .then((r) => r.text())
            .catch(() => {});
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      try {
        return await eventually(async () => ((await canary(name)).status === want ? canary(name) : undefined), `canary ${name} ${want}`, 90_000, 250);
      } catch (err) {
        throw new Error(`${(err as Error).message}\nstatus: ${JSON.stringify(await canary(name))}\n--- cluster ---\n${diagnostics()}`);
      } finally {
        done = true;
        await load;
      }
    }
    // Each canary's traffic goes through one router: a controller that read only some routers would hold (or pass) it.
    const failed = await rollout('canary-a', 'flaky', routers[0], 'failed');
    assert.ok(failed.failureRate >= 30 && failed.failureRate <= 70, `rate ${failed.failureRate}`);
    assert.deepEqual((await kubectlJson(['-n', 'default', 'get', 'httptriggers.flint.dev', 'canary-a'])).spec.functionref.functionweights, { hello: 100, flaky: 0 });
    const succeeded = await rollout('canary-b', 'hello2', routers[1], 'succeeded');
    assert.equal(succeeded.failureRate, 0);
    assert.ok(succeeded.requests > 0);
    assert.deepEqual((await kubectlJson(['-n', 'default', 'get', 'httptriggers.flint.dev', 'canary-b'])).spec.functionref.functionweights, { hello: 0, hello2: 100 });
    // What the later tests count on: only their own functions.
    for (const name of ['canary-a', 'canary-b']) {
      await ok(['canary', 'delete', '--name', name]);
      await ok(['route', 'delete', '--name', name]);
    }
    for (const fn of ['flaky', 'hello2']) await ok(['fn', 'delete', '--name', fn]);
  });

  it('upgrades to a changed values file under steady traffic', async (t) => {
    const before = names(await flintPods());
    const functionPods = async () => (await kubectlJson(['-n', FUNCTION_NAMESPACE, 'get', 'pods', '-l', 'functionName=hello'])).items.map((p: any) => p.metadata.name).sort();
    const servedBy = await functionPods();
    const base = routerService();
    let running = true;
    let served = 0;
    const failures: string[] = [];
    let retried = 0;
    // A GET whose reused keep-alive connection was closed before any answer came (a router pod stopping closes its idle
    // connections) is sent once more on a new one, as Go's http.Transport and browsers do for idempotent requests; such
    // retries are counted and reported, and a second failure counts as a failure.
    const callOnce = async () => {
      try {
        return await call(base);
      } catch (err) {
        const why = `${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`;
        if (!/other side closed|ECONNRESET|socket hang up/.test(why)) throw err;
        retried++;
        return call(base);
      }
    };
    // Four clients, each one request after another on a keep-alive connection, through the router Service as any client in the cluster would call it.
    const client = async () => {
      while (running) {
        try {
          const r = await callOnce();
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
      for (const d of Object.values(DEPLOYMENTS)) await cp.kubectl(['-n', FLINT_NAMESPACE, 'rollout', 'status', `deployment/${d}`, '--timeout=180s']);
      // The old routers drain (router.drainSeconds) and stop, the old executor leader hands its Lease over; traffic goes on until every old pod is gone and a while after.
      await eventually(async () => !(await flintPods()).some((p) => before.includes(p.metadata.name)), 'the old pods gone', 180_000);
      const after = served;
      await eventually(async () => served >= after + 50, 'traffic served by the new pods alone', 60_000);
    } finally {
      running = false;
      await Promise.all(clients);
    }
    t.diagnostic(`helm upgrade under steady traffic: ${served} requests served, ${failures.length} failed, ${retried} sent again after their reused connection closed`);
    // The CLI follows the new pods (before any assertion, so that the cases after this one run against them either way).
    cli.env = { ...cli.env, FLINT_URL: await controllerUrl(), FLINT_ROUTER_URL: routerUrl((await readyPods('router'))[0]) };
    assert.deepEqual(failures, [], `failed requests during helm upgrade (of ${served + failures.length})\n--- cluster ---\n${diagnostics()}`);
    for (const component of COMPONENTS) {
      const now = await settled(component, REPLICAS[component]);
      assert.ok(!now.some((p) => before.includes(p.metadata.name)), `new ${component} pods`);
    }
    assert.match((await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'configmap', 'flint-values'])).data['values.yaml'], /jwtExpiryTime: 600/);
    // The new executor leader adopted the function's pod rather than specializing another (src/executor/kubernetes/adoption.ts).
    assert.deepEqual(await functionPods(), servedBy);
  });

  it('runs three routers after helm upgrade --set router.replicas=3, each answering on its own address, and restarts nothing else', async () => {
    const others = names([...(await flintPods('controller')), ...(await flintPods('executor'))]);
    await helmRun(['upgrade', 'flint', CHART, '--namespace', FLINT_NAMESPACE, '-f', path.join(work, 'upgrade.yaml'), '--set', 'router.replicas=3']);
    const routers = await settled('router', 3);
    assert.equal((await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'deployment', 'flint-router'])).spec.replicas, 3);
    // Each router, the new one too, finds the executor leader through its Lease and gets the function's address from it.
    for (const router of routers) assert.deepEqual(await call(routerUrl(router)), { status: 200, text: HELLO }, `through router pod ${router.metadata.name}`);
    for (let i = 0; i < 6; i++) assert.deepEqual(await call(routerService()), { status: 200, text: HELLO }, 'through the router Service');
    // A replica count is not a new values file: the controller and the executors kept running.
    assert.deepEqual(names([...(await flintPods('controller')), ...(await flintPods('executor'))]), others);
  });

  it('lets a standby executor take over from a leader that stops and from one that dies', async (t) => {
    const calledFresh = async (name: string) => {
      // A function no router has an address for yet: the new leader must specialize a pod for it.
      await ok(['fn', 'create', '--name', name, '--env', 'nodejs', '--code', 'hello.js']);
      await ok(['route', 'create', '--name', name, '--url', `/${name}`, '--function', name]);
      const routers = await readyPods('router');
      for (const router of routers) {
        // Until the router's table has the route (404), and while the new leader is still taking over its pods.
        const seen: string[] = [];
        await eventually(
          async () => {
            const r = await fetch(`${routerUrl(router)}/${name}`, { headers: { authorization: `Bearer ${routerToken}` } });
            const text = await r.text();
            if (r.status === 200 && text === HELLO) return true;
            seen.push(`${r.status} ${text.slice(0, 200)}`);
            return false;
          },
          `${name} answered through ${router.metadata.name}`,
          60_000,
          250,
        ).catch((err) => {
          throw new Error(`${err.message}; its last answers: ${seen.slice(-3).join(' | ')}\n--- cluster ---\n${diagnostics()}`);
        });
      }
    };
    // A graceful stop releases the Lease: the standby leads at its next try.
    const first = await eventually(executorLeader, 'an executor leader', 60_000, 250);
    await cp.kubectl(['-n', FLINT_NAMESPACE, 'delete', 'pod', first.pod.metadata.name, '--wait=false']);
    const second = await newLeader(first.holder, 'another executor leading after the leader stopped');
    assert.notEqual(second.pod.metadata.name, first.pod.metadata.name);
    t.diagnostic(`executor leader stopped: ${first.holder} -> ${second.holder}`);
    await calledFresh('after-stop');
    await settled('executor', REPLICAS.executor);
    // A leader that dies does not release the Lease: another process takes it once it has gone unrenewed for leaseDurationSeconds.
    await agent.crash(FLINT_NAMESPACE, second.pod.metadata.name);
    const third = await newLeader(second.holder, 'another executor leading after the leader died');
    t.diagnostic(`executor leader died: ${second.holder} -> ${third.holder}`);
    await calledFresh('after-crash');
    // The calls made before keep working through the Service.
    assert.deepEqual(await call(routerService()), { status: 200, text: HELLO });
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
    // the executor service's token, and what Kubernetes puts in every namespace.
    assert.deepEqual(left, [
      `ConfigMap ${FLINT_NAMESPACE}/kube-root-ca.crt`,
      `Secret ${FLINT_NAMESPACE}/executor`,
      `Secret ${FLINT_NAMESPACE}/router`,
      `ServiceAccount ${FLINT_NAMESPACE}/default`,
    ]);
    const cluster = (await kubectlJson(['get', 'clusterroles,clusterrolebindings,namespaces,customresourcedefinitions'])).items
      .filter((o: any) => o.metadata.name.includes('flint'))
      .map((o: any) => `${o.kind} ${o.metadata.name}`)
      .sort();
    assert.deepEqual(cluster, [
      'CustomResourceDefinition canaryconfigs.flint.dev',
      'CustomResourceDefinition environments.flint.dev',
      'CustomResourceDefinition functions.flint.dev',
      'CustomResourceDefinition httptriggers.flint.dev',
      'CustomResourceDefinition messagequeuetriggers.flint.dev',
      'CustomResourceDefinition packages.flint.dev',
      'CustomResourceDefinition timetriggers.flint.dev',
      `Namespace ${FLINT_NAMESPACE}`,
    ]);
    // The custom resources stay with their definitions: a reinstall finds the functions again.
    const fns = (await kubectlJson(['-n', 'default', 'get', 'functions.flint.dev'])).items.map((f: any) => f.metadata.name).sort();
    assert.deepEqual(fns, ['after-crash', 'after-stop', 'fetcher', 'hello']);
    // The Leases the components elected with stay: they are the components', not the chart's. (Whether each was released
    // on the way out is a race: helm deletes the Role that lets its holder write it while the pod is still stopping.)
    const leases = (await kubectlJson(['-n', FLINT_NAMESPACE, 'get', 'leases'])).items;
    assert.deepEqual(leases.map((l: any) => `${l.metadata.name} ${l.metadata.labels?.['flint.dev/leader-of']}`).sort(), ['flint-controller controller', 'flint-executor executor']);
  });
});
