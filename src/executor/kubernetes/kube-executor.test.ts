// The kubernetes executor against the fake API server, with the fake
// kubelet running each pod's containers as real sandboxed processes: pool
// Deployments, claims, the fetcher's specialization, requests to the pod,
// scale-out, updates, failures and the mesh option.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { storeResources } from '../../../test/fake-kube/crd-resources.ts';
import { DEPLOYMENT_RESOURCE, type FakeKubelet, POD_RESOURCE, SERVICE_RESOURCE, startFakeKubelet } from '../../../test/fake-kube/kubelet.ts';
import { type FakeKube, startFakeKube } from '../../../test/fake-kube/server.ts';
import type { Environment, FunctionResource, Package } from '../../api/kinds.ts';
import { dataLayout, functionLogFile } from '../../config/layout.ts';
import { sandboxAvailable } from '../../sandbox/bwrap.ts';
import { createKubeClient, type KubeClient } from '../../store/kube-client.ts';
import { type KubeStore, openKubeStore } from '../../store/kubernetes.ts';
import { eventually } from '../../testing/eventually.ts';
import type { Lease } from '../types.ts';
import { createKubeExecutor, type KubeExecutor } from './kube-executor.ts';
import { ISTIO_INJECT, poolDeployment } from './pool-deployment.ts';

const FN_NS = 'flint-function';
const FETCHER = 'ghcr.io/flint/flint:test';
const PODS = { group: '', version: 'v1', resource: 'pods' };
const SERVICES = { group: '', version: 'v1', resource: 'services' };

function env(name: string, extra: Partial<Environment['spec']> = {}): Environment {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Environment',
    metadata: { name, namespace: 'default' } as Environment['metadata'],
    spec: { runtime: { image: 'ghcr.io/fission/node-env:latest' }, poolsize: 2, ...extra },
  };
}

function pkg(name: string, code: string): Package {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Package',
    metadata: { name, namespace: 'default' } as Package['metadata'],
    spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from(code).toString('base64') } },
  };
}

function fn(name: string, pkgName: string, extra: Partial<FunctionResource['spec']> = {}): FunctionResource {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Function',
    metadata: { name, namespace: 'default' } as FunctionResource['metadata'],
    spec: { environment: { name: 'node' }, package: { packageref: { name: pkgName } }, ...extra },
  };
}

async function call(lease: Lease): Promise<string> {
  const res = await fetch(`http://${lease.address}/`);
  return `${res.status} ${await res.text()}`;
}

function readLog(layout: ReturnType<typeof dataLayout>, name: string): string {
  try {
    return fs.readFileSync(functionLogFile(layout, 'default', name), 'utf8');
  } catch {
    return '';
  }
}

/** A lease on an already specialized pod, once there is one (no cold start). */
async function warmLease(executor: KubeExecutor, f: FunctionResource, what: string): Promise<Lease> {
  let lease: Lease | undefined;
  await eventually(() => {
    lease = executor.tryAcquire(f);
    return lease !== undefined;
  }, what);
  return lease as Lease;
}

async function managedPods(client: KubeClient): Promise<string[]> {
  const list = await client.list<any>(PODS, FN_NS, { labelSelector: 'managed=true' });
  return list.items.map((p) => p.metadata.name);
}

// The fake kubelet runs containers under bubblewrap, as local mode runs workers.
const usable = await sandboxAvailable();

interface Rig {
  fake: FakeKube;
  client: KubeClient;
  store: KubeStore;
  kubelet: FakeKubelet;
  executor: KubeExecutor;
  stop(): Promise<void>;
}

/** The fake API server and kubelet, the store on them, and an executor (not started) with `extra` options. */
async function startRig(extra: Partial<Parameters<typeof createKubeExecutor>[0]>, log: (line: string) => void): Promise<Rig> {
  const fake = await startFakeKube({ resources: [...storeResources(), DEPLOYMENT_RESOURCE, POD_RESOURCE, SERVICE_RESOURCE] });
  const client = createKubeClient({ baseUrl: fake.url });
  const store = await openKubeStore({ client });
  const kubelet = startFakeKubelet({ client, fetcherImage: FETCHER, log });
  const executor = createKubeExecutor({
    store,
    client,
    logger: pino({ level: 'silent' }),
    functionNamespace: FN_NS,
    fetcherImage: FETCHER,
    controllerUrl: 'http://127.0.0.1:1',
    reapIntervalMs: 100,
    ...extra,
  });
  return {
    fake,
    client,
    store,
    kubelet,
    executor,
    async stop() {
      try {
        await executor.stop();
      } finally {
        await kubelet.stop();
        await store.close();
        await fake.close();
      }
    },
  };
}

describe('kubernetes executor (fake API server, fake kubelet)', () => {
  let fake: FakeKube;
  let client: KubeClient;
  let store: KubeStore;
  let kubelet: FakeKubelet;
  let executor: KubeExecutor;
  let rig: Rig;
  const logs: string[] = [];
  const layout = dataLayout(fs.mkdtempSync(path.join(os.tmpdir(), 'flint-kube-exec-')));

  before(async () => {
    if (!usable) return;
    rig = await startRig({ layout }, (l) => logs.push(l));
    ({ fake, client, store, kubelet, executor } = rig);
    fake.setPodLogs(kubelet.logs);
    await store.create(env('node'));
    await executor.start();
  });

  after(async () => {
    if (!usable) return;
    try {
      await rig.stop();
    } finally {
      fs.rmSync(layout.root, { recursive: true, force: true });
    }
  });

  it('keeps a pool Deployment per environment, and specializes a claimed pod through its fetcher', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    const [deployment] = fake.objects('deployments.apps', FN_NS);
    assert.match(deployment.metadata.name, /^poolmgr-node-default-\d+$/);
    assert.equal(deployment.spec.replicas, 2);
    await store.create(pkg('hello', "module.exports = async () => ({ status: 200, body: 'hello from a pod' });\n"));
    const f = await store.create(fn('hello', 'hello'));
    const lease = await executor.acquire(f);
    try {
      assert.equal(lease.coldStart, true);
      assert.match(lease.address ?? '', /^127\.\d+\.\d+\.\d+:8888$/);
      assert.equal(await call(lease), '200 hello from a pod');
    } finally {
      lease.release();
    }
    const pod = fake.objects('pods', FN_NS).find((p) => p.metadata.name === lease.instanceId);
    assert.equal(pod.metadata.labels.managed, 'false');
    assert.equal(pod.metadata.labels.functionName, 'hello');
    assert.equal(pod.metadata.labels.functionUid, f.metadata.uid);
    // The Deployment replaces the pod it lost.
    await eventually(async () => (await managedPods(client)).length === 2, 'the pool back at 2 generic pods');
    // A generic pod takes code only from the executor: its fetcher wants the token from the flint-fetcher Secret.
    const [fetcherEnv] = deployment.spec.template.spec.containers[1].env;
    assert.deepEqual(fetcherEnv, { name: 'FLINT_FETCHER_TOKEN', valueFrom: { secretKeyRef: { name: 'flint-fetcher', key: 'token' } } });
    assert.ok(fake.objects('secrets', FN_NS).some((x) => x.metadata.name === 'flint-fetcher'));
    let generic: any;
    await eventually(async () => {
      generic = (await client.list<any>(PODS, FN_NS, { labelSelector: 'managed=true' })).items.find((p) => p.status?.conditions?.[0]?.status === 'True');
      return generic !== undefined;
    }, 'a ready generic pod');
    const intruder = await fetch(`http://${generic.status.podIP}:8000/specialize`, { method: 'POST', body: '{}' });
    assert.equal(intruder.status, 401);
    const warm = executor.tryAcquire(f);
    assert.ok(warm, 'a warm pod is leased without waiting');
    assert.equal(warm.instanceId, lease.instanceId);
    assert.equal(warm.coldStart, false);
    warm.release();
  });

  it('claims another pod while concurrent requests outnumber requestsPerPod', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    await store.create(pkg('busy', "module.exports = async () => ({ status: 200, body: 'busy' });\n"));
    const f = await store.create(fn('busy', 'busy', { requestsPerPod: 1 }));
    const [a, b] = await Promise.all([executor.acquire(f), executor.acquire(f)]);
    try {
      assert.notEqual(a.instanceId, b.instanceId);
      assert.deepEqual([await call(a), await call(b)], ['200 busy', '200 busy']);
    } finally {
      a.release();
      b.release();
    }
  });

  it('gives an updated function new pods and deletes the old one once it is free', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    await store.create(pkg('v', "module.exports = async () => ({ status: 200, body: 'v1' });\n"));
    const f1 = await store.create(fn('versioned', 'v'));
    const old = await executor.acquire(f1);
    const current = (await store.get('Package', 'default', 'v')) as Package;
    await store.update({ ...current, spec: { ...current.spec, deployment: { type: 'literal', literal: Buffer.from("module.exports = async () => ({ status: 200, body: 'v2' });\n").toString('base64') } } });
    const f2 = await store.update({ ...f1, spec: { ...f1.spec, functionTimeout: 30 } });
    await eventually(async () => {
      const l = await executor.acquire(f2);
      const body = await call(l);
      l.release();
      return body === '200 v2';
    }, 'the new code served');
    assert.equal(await call(old), '200 v1', 'the old pod finishes what it holds');
    old.release();
    await eventually(() => !fake.objects('pods', FN_NS).some((p) => p.metadata.name === old.instanceId), 'the old pod deleted');
  });

  it("copies a claimed pod's log into the function's log, with the executor's own lines", { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    await store.create(pkg('chatty', "module.exports = async (ctx) => { console.log('handling', ctx.request.method); console.error('  indented on stderr'); return { status: 200, body: 'ok' }; };\n"));
    const f = await store.create(fn('chatty', 'chatty'));
    const lease = await executor.acquire(f);
    try {
      assert.equal(await call(lease), '200 ok');
    } finally {
      lease.release();
    }
    await eventually(() => readLog(layout, 'chatty').includes('indented on stderr'), "the handler's output in the function log");
    const text = readLog(layout, 'chatty');
    assert.match(text, new RegExp(`\\[flint\\] pod ${lease.instanceId} specialized\n`));
    assert.match(text, /\[stdout\] handling GET\n/);
    // The pod log's lines keep their leading whitespace.
    assert.match(text, /\[stdout\] {3}indented on stderr\n/);
  });

  it('reports code the environment refuses, naming the function and the reason, and deletes the pod', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    await store.create(pkg('broken', 'module.exports = async (ctx => {\n'));
    const f = await store.create(fn('broken', 'broken'));
    await assert.rejects(executor.acquire(f), (err: any) => {
      assert.equal(err.code, 'FLINT_ERR_SPECIALIZE_FAILED');
      assert.match(err.message, /function 'broken' failed to specialize on pod poolmgr-node-default-\d+-\w+: the environment refused to load the function/);
      return true;
    });
    await eventually(() => !fake.objects('pods', FN_NS).some((p) => p.metadata.labels.functionName === 'broken'), 'the failed pod deleted');
    // Log lines go through a write stream: they reach the file a moment after the failure.
    await eventually(
      () => /\[flint\] function 'broken' failed to specialize on pod \S+: the environment refused to load the function/.test(readLog(layout, 'broken')),
      'the failure in the function log',
    );
  });

  it('replaces a pod that stopped answering', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    await store.create(pkg('crashy', "module.exports = async () => ({ status: 200, body: 'alive' });\n"));
    const f = await store.create(fn('crashy', 'crashy'));
    const first = await executor.acquire(f);
    await kubelet.crash(FN_NS, first.instanceId);
    await assert.rejects(call(first));
    first.release('unreachable');
    const second = await executor.acquire(f);
    try {
      assert.notEqual(second.instanceId, first.instanceId);
      assert.equal(await call(second), '200 alive');
    } finally {
      second.release();
    }
  });

  it('stops using a pod deleted behind its back, before any request fails on it', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    await store.create(pkg('evicted', "module.exports = async () => ({ status: 200, body: 'here' });\n"));
    const f = await store.create(fn('evicted', 'evicted'));
    const first = await executor.acquire(f);
    assert.equal(await call(first), '200 here');
    first.release();
    await client.delete(PODS, FN_NS, first.instanceId);
    await eventually(() => readLog(layout, 'evicted').includes(`pod ${first.instanceId} is gone or not ready`), 'the vanished pod noticed');
    assert.equal(executor.tryAcquire(f), undefined, 'no lease on the vanished pod');
    const next = await executor.acquire(f);
    assert.notEqual(next.instanceId, first.instanceId);
    assert.equal(await call(next), '200 here');
    next.release();
  });

  it('reaps a pod idle for longer than idletimeout', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    await store.create(pkg('idle', "module.exports = async () => ({ status: 200, body: 'idle' });\n"));
    const f = await store.create(fn('idle', 'idle', { idletimeout: 1 }));
    const lease = await executor.acquire(f);
    lease.release();
    await eventually(() => !fake.objects('pods', FN_NS).some((p) => p.metadata.name === lease.instanceId), 'the idle pod deleted', 10_000);
  });

  it('keeps minScale pods of a newdeploy function specialized in a Deployment of its own, grows it to maxScale under load, and shrinks it when idle', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    await store.create(pkg('nd', "module.exports = async () => { await new Promise((r) => setTimeout(r, 200)); return { status: 200, body: 'dedicated' }; };\n"));
    const f = await store.create(
      fn('nd', 'nd', { idletimeout: 1, invokeStrategy: { strategyType: 'execution', executionStrategy: { executorType: 'newdeploy', minScale: 1, maxScale: 2 } } }),
    );
    const name = `newdeploy-nd-default-${f.metadata.uid.slice(-17)}`;
    const deployment = () => fake.objects('deployments.apps', FN_NS).find((d) => d.metadata.name === name);
    const fnPods = () => fake.objects('pods', FN_NS).filter((p) => p.metadata.labels.functionUid === f.metadata.uid);
    await eventually(() => deployment()?.spec.replicas === 1, 'the Deployment at minScale');
    assert.equal(deployment().spec.template.metadata.labels.executorType, 'newdeploy');
    // Specialized before any call: the first one is warm.
    const first = await warmLease(executor, f, 'a specialized pod before the first call');
    assert.equal(first.coldStart, false);
    // A second call while the first pod is busy grows the Deployment to maxScale.
    const second = await executor.acquire(f);
    assert.notEqual(second.instanceId, first.instanceId);
    assert.equal(deployment().spec.replicas, 2);
    assert.deepEqual(await Promise.all([call(first), call(second)]), ['200 dedicated', '200 dedicated']);
    first.release();
    second.release();
    // Idle, it shrinks back to minScale, and the pod it keeps is still specialized.
    await eventually(() => deployment()?.spec.replicas === 1 && fnPods().length === 1, 'back to minScale', 15_000);
    const again = executor.tryAcquire(f);
    assert.ok(again, 'the minScale pod still serves');
    assert.equal(await call(again), '200 dedicated');
    again.release();
    await store.delete('Function', 'default', 'nd');
    await eventually(() => !deployment() && fnPods().length === 0, 'the Deployment and its pods deleted with the function');
  });

  it('switches a newdeploy function to new code under steady traffic without a failed request', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    const code = (v: string) => `module.exports = async () => { await new Promise((r) => setTimeout(r, 20)); return { status: 200, body: '${v}' }; };\n`;
    await store.create(pkg('steady', code('v1')));
    const f = await store.create(
      fn('steady', 'steady', { invokeStrategy: { strategyType: 'execution', executionStrategy: { executorType: 'newdeploy', minScale: 1, maxScale: 3 } } }),
    );
    (await warmLease(executor, f, 'a warm pod')).release();
    const seen = new Map<string, number>();
    const failures: string[] = [];
    let stop = false;
    const loop = async () => {
      while (!stop) {
        try {
          const lease = await executor.acquire(f);
          try {
            const answer = await call(lease);
            seen.set(answer, (seen.get(answer) ?? 0) + 1);
            if (!answer.startsWith('200 ')) failures.push(answer);
          } finally {
            lease.release();
          }
        } catch (err) {
          failures.push(String(err));
        }
      }
    };
    const loops = [loop(), loop(), loop()];
    try {
      await eventually(() => (seen.get('200 v1') ?? 0) >= 10, 'traffic on v1');
      const current = (await store.get('Package', 'default', 'steady')) as Package;
      await store.update({ ...current, spec: { ...current.spec, deployment: { type: 'literal', literal: Buffer.from(code('v2')).toString('base64') } } });
      await eventually(() => (seen.get('200 v2') ?? 0) >= 20, 'traffic moved to v2', 30_000);
    } finally {
      stop = true;
      await Promise.all(loops);
    }
    assert.deepEqual(failures, []);
    await store.delete('Function', 'default', 'steady');
  });

  it("moves a newdeploy function to new pods when its environment changes", { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    const e = await store.create({ ...env('ndenv'), spec: { ...env('ndenv').spec, poolsize: 0 } });
    const p = pkg('nd2', "module.exports = async () => ({ status: 200, body: 'moved' });\n");
    await store.create({ ...p, spec: { ...p.spec, environment: { name: 'ndenv' } } });
    const f = await store.create(
      fn('nd2', 'nd2', { environment: { name: 'ndenv' }, invokeStrategy: { strategyType: 'execution', executionStrategy: { executorType: 'newdeploy', minScale: 1 } } }),
    );
    const warm = await warmLease(executor, f, 'a warm pod');
    const before = warm.instanceId;
    warm.release();
    let lease: Lease | undefined;
    await store.update({ ...e, spec: { ...e.spec, runtime: { image: 'ghcr.io/fission/node-env:1.32' } } });
    const name = `newdeploy-nd2-default-${f.metadata.uid.slice(-17)}`;
    await eventually(() => fake.objects('deployments.apps', FN_NS).find((d) => d.metadata.name === name)?.spec.template.spec.containers[0].image === 'ghcr.io/fission/node-env:1.32', 'the template on the new image');
    await eventually(() => {
      lease = executor.tryAcquire(f);
      if (lease && lease.instanceId === before) lease.release();
      return lease !== undefined && lease.instanceId !== before;
    }, 'a new warm pod');
    const pod = fake.objects('pods', FN_NS).find((x) => x.metadata.name === (lease as Lease).instanceId);
    assert.equal(pod.spec.containers[0].image, 'ghcr.io/fission/node-env:1.32');
    assert.equal(await call(lease as Lease), '200 moved');
    (lease as Lease).release();
    assert.ok(!fake.objects('pods', FN_NS).some((x) => x.metadata.name === before), 'the old pod deleted');
    await store.delete('Function', 'default', 'nd2');
    await store.delete('Environment', 'default', 'ndenv');
  });

  it('deletes an environment\'s pool with the environment, and replaces it when the environment changes', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    const e = await store.create({ ...env('other'), spec: { ...env('other').spec, poolsize: 1 } });
    await eventually(() => fake.objects('deployments.apps', FN_NS).some((d) => d.metadata.name === `poolmgr-other-default-${e.metadata.resourceVersion}`), 'the pool created');
    const e2 = await store.update({ ...e, spec: { ...e.spec, poolsize: 1, runtime: { image: 'ghcr.io/fission/node-env:1.32' } } });
    await eventually(() => {
      const names = fake.objects('deployments.apps', FN_NS).map((d) => d.metadata.name).filter((n) => n.startsWith('poolmgr-other-'));
      return names.length === 1 && names[0] === `poolmgr-other-default-${e2.metadata.resourceVersion}`;
    }, 'the old pool replaced');
    await store.delete('Environment', 'default', 'other');
    await eventually(() => !fake.objects('deployments.apps', FN_NS).some((d) => d.metadata.name.startsWith('poolmgr-other-')), 'the pool deleted');
  });

  it('follows its pods with one watch, and writes no Deployment while nothing changes', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    // Every claim and newdeploy hand-out above waited on the watch: the executor listed the namespace's pods once (a 410 would add one).
    const podLists = fake.requests.filter((r) => r.method === 'GET' && r.path === `/api/v1/namespaces/${FN_NS}/pods?labelSelector=executorType`);
    assert.ok(podLists.length >= 1 && podLists.length <= 2, `${podLists.length} pod lists`);
    await store.create(pkg('quiet', "module.exports = async () => ({ status: 200, body: 'idle' });\n"));
    const f = await store.create(fn('quiet', 'quiet', { invokeStrategy: { strategyType: 'execution', executionStrategy: { executorType: 'newdeploy', minScale: 1 } } }));
    (await warmLease(executor, f, 'a warm pod')).release();
    // The Deployment controller's status writes aside: those are not Flint's.
    const writes = () => fake.requests.filter((r) => r.method !== 'GET' && r.path.includes('/deployments') && !r.path.endsWith('/status')).map((r) => `${r.method} ${r.path}`);
    await new Promise((r) => setTimeout(r, 300));
    const before = writes();
    // Twenty reaper rounds (every 100 ms) over a pool and a newdeploy function kept at minScale.
    await new Promise((r) => setTimeout(r, 2000));
    assert.deepEqual(writes().slice(before.length), []);
    assert.ok(
      writes().every((w) => w.startsWith('PATCH ') || w.startsWith('DELETE ')),
      'Deployments are written by apply, never replaced',
    );
    await store.delete('Function', 'default', 'quiet');
  });
});

describe('kubernetes executor with enableIstio', () => {
  it('names ports for the mesh, skips the sidecar for environments allowed out, and serves a function through its own Service', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    const serviceHosts: string[] = [];
    let client: KubeClient | undefined;
    const rig = await startRig(
      {
        enableIstio: true,
        reapIntervalMs: undefined,
        // No cluster DNS here: the Service's one pod stands in for its address, found by the Service's own selector.
        serviceHost: async (name, namespace) => {
          serviceHosts.push(`${name}.${namespace}`);
          const svc = await client!.get<any>(SERVICES, namespace, name);
          const selector = Object.entries(svc.spec.selector).map(([k, v]) => `${k}=${v}`).join(',');
          const pods = await client!.list<any>(PODS, namespace, { labelSelector: selector });
          return pods.items[0].status.podIP;
        },
      },
      () => {},
    );
    client = rig.client;
    const { fake, store, executor } = rig;
    try {
      await store.create(env('node', { allowAccessToExternalNetwork: true, poolsize: 1 }));
      await executor.start();
      const [deployment] = fake.objects('deployments.apps', FN_NS);
      assert.equal(deployment.spec.template.metadata.annotations[ISTIO_INJECT], 'false');
      assert.deepEqual(
        deployment.spec.template.spec.containers.map((c: any) => c.ports[0].name),
        ['http-env', 'http-fetcher'],
      );
      await store.create(pkg('mesh', "module.exports = async () => ({ status: 200, body: 'meshed' });\n"));
      const f = await store.create(fn('mesh', 'mesh', { requestsPerPod: 1 }));
      const lease = await executor.acquire(f);
      assert.equal(await call(lease), '200 meshed');
      const [svc] = fake.objects('services', FN_NS);
      assert.equal(svc.metadata.name, 'istio-mesh-default');
      assert.deepEqual(svc.spec.selector, { functionName: 'mesh', functionUid: f.metadata.uid });
      assert.deepEqual(
        svc.spec.ports.map((p: any) => [p.name, p.port]),
        [
          ['http-fetcher', 8000],
          ['http-env', 8888],
        ],
      );
      assert.deepEqual(serviceHosts, ['istio-mesh-default.flint-function']);
      // One pod per function behind its Service: a second request waits for the first rather than claiming another pod.
      const second = executor.acquire(f);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(fake.objects('pods', FN_NS).filter((p) => p.metadata.labels.functionName === 'mesh').length, 1);
      lease.release();
      (await second).release();
      await store.delete('Function', 'default', 'mesh');
      await eventually(() => fake.objects('services', FN_NS).length === 0, 'the Service deleted with its function');
    } finally {
      await rig.stop();
    }
  });

  it('leaves the sidecar alone for environments kept inside, and when the mesh is off', () => {
    const e = { ...env('x', { allowAccessToExternalNetwork: true }), metadata: { name: 'x', namespace: 'default', uid: 'u', resourceVersion: '7' } } as Environment;
    const off = poolDeployment(e, { namespace: FN_NS, fetcherImage: FETCHER, enableIstio: false, poolSize: 3 }) as any;
    assert.equal(off.spec.template.metadata.annotations, undefined);
    const inside = poolDeployment({ ...e, spec: { ...e.spec, allowAccessToExternalNetwork: false } }, { namespace: FN_NS, fetcherImage: FETCHER, enableIstio: true, poolSize: 3 }) as any;
    assert.equal(inside.spec.template.metadata.annotations, undefined);
  });

  it("runs the environment's poolsize of pool pods, else the install's poolSize", () => {
    const e = { ...env('x'), metadata: { name: 'x', namespace: 'default', uid: 'u', resourceVersion: '7' } } as Environment;
    const o = { namespace: FN_NS, fetcherImage: FETCHER, enableIstio: false, poolSize: 5 };
    assert.equal((poolDeployment(e, o) as any).spec.replicas, 2);
    const { poolsize: _, ...unsized } = e.spec;
    assert.equal((poolDeployment({ ...e, spec: unsized }, o) as any).spec.replicas, 5);
    // Pods for the first calls expected soon come on top.
    assert.equal((poolDeployment(e, { ...o, extra: 4 }) as any).spec.replicas, 6);
  });
});

/** The replicas of environment node's pool Deployment, once there is one. */
function poolReplicas(rig: Rig): number | undefined {
  return rig.fake.objects('deployments.apps', FN_NS).find((d) => d.metadata.name.startsWith('poolmgr-node-'))?.spec.replicas;
}

/**
 * A rig for the describe this is called in: started before its tests (with `setUp` run before the executor starts,
 * so that what it creates is found at start) and stopped after them. Returns a getter, as the rig exists only then.
 */
function rigAround(options: Partial<Parameters<typeof createKubeExecutor>[0]>, setUp: (rig: Rig) => Promise<void>): () => Rig {
  let rig: Rig | undefined;
  before(async () => {
    if (!usable) return;
    rig = await startRig(options, () => {});
    await setUp(rig);
    await rig.executor.start();
  });
  after(async () => {
    await rig?.stop();
  });
  return () => rig as Rig;
}

describe('kubernetes executor: the pool grows ahead of first calls', () => {
  const theRig = rigAround({ firstCallWindowSeconds: 300 }, async (r) => {
    await r.store.create(env('node', { poolsize: 1 }));
    // Found at start: not counted.
    await r.store.create(pkg('old', "module.exports = async () => ({ status: 200, body: 'old' });\n"));
    await r.store.create(fn('old', 'old'));
  });
  const replicas = () => poolReplicas(theRig());

  it("adds a pool pod for each new function until it is called or deleted, and none for those found at start", { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    const rig = theRig();
    await eventually(() => replicas() === 1, 'the pool Deployment at its size');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(replicas(), 1);
    await rig.store.create(pkg('p', "module.exports = async () => ({ status: 200, body: 'new' });\n"));
    const fns = [await rig.store.create(fn('a', 'p')), await rig.store.create(fn('b', 'p')), await rig.store.create(fn('c', 'p'))];
    await eventually(() => replicas() === 4, 'one more replica for each new function');
    await eventually(async () => (await managedPods(rig.client)).length === 4, 'four generic pods');
    const lease = await rig.executor.acquire(fns[0]);
    assert.equal(await call(lease), '200 new');
    lease.release();
    // The pod it took is not replaced: the pool shrinks by it.
    await eventually(() => replicas() === 3, 'the replica the first call took given back');
    await rig.store.delete('Function', 'default', 'b');
    await eventually(() => replicas() === 2, 'a deleted function no longer counted');
    await eventually(async () => (await managedPods(rig.client)).length === 2, 'two generic pods');
  });
});

describe('kubernetes executor: first calls expected for a short window', () => {
  const theRig = rigAround({ firstCallWindowSeconds: 1 }, async (r) => {
    await r.store.create(env('node', { poolsize: 1 }));
  });
  const replicas = () => poolReplicas(theRig());

  it('gives the replica back when the window passes without a call, and counts no newdeploy function', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    const rig = theRig();
    await eventually(() => replicas() === 1, 'the pool Deployment at its size');
    await rig.store.create(pkg('p', "module.exports = async () => ({ status: 200, body: 'new' });\n"));
    await rig.store.create(fn('a', 'p'));
    await eventually(() => replicas() === 2, 'one more replica for the new function');
    await eventually(() => replicas() === 1, 'the replica given back a second later, on a reap');
    await rig.store.create(fn('dedicated', 'p', { invokeStrategy: { executionStrategy: { executorType: 'newdeploy' } } } as Partial<FunctionResource['spec']>));
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(replicas(), 1, 'a newdeploy function runs on pods of its own');
  });
});

describe('kubernetes executor: a burst of first calls', () => {
  // Two environments, so that one's claims cannot forget what the other's are taking.
  const burst = [
    { env: 'node', names: ['b0', 'b1', 'b2'] },
    { env: 'node2', names: ['c0', 'c1', 'c2'] },
  ];
  const fns: FunctionResource[] = [];
  const theRig = rigAround({}, async (r) => {
    for (const { env: envName, names } of burst) {
      await r.store.create(env(envName, { poolsize: names.length }));
      const p = pkg(`p-${envName}`, "module.exports = async () => ({ status: 200, body: 'burst' });\n");
      await r.store.create({ ...p, spec: { ...p.spec, environment: { name: envName } } });
      for (const name of names) fns.push(await r.store.create(fn(name, `p-${envName}`, { environment: { name: envName } })));
    }
  });

  it('claims a different pod for each concurrent first call, without conflicting with its own claims', { skip: !usable && 'bubblewrap is not usable here' }, async () => {
    const rig = theRig();
    const readyPool = async () => {
      const list = await rig.client.list<any>(PODS, FN_NS, { labelSelector: 'managed=true' });
      return list.items.filter((p) => p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True')).length;
    };
    await eventually(async () => (await readyPool()) === fns.length, 'a ready pool pod for each call', 60_000);
    const from = rig.fake.requests.length;
    const leases = await Promise.all(fns.map((f) => rig.executor.acquire(f)));
    for (const lease of leases) {
      assert.equal(await call(lease), '200 burst');
      lease.release();
    }
    assert.equal(new Set(leases.map((l) => l.address)).size, fns.length, 'a pod each');
    // Picking at random among the same pods, concurrent claims conflicted with each other on the API server.
    const relabels = rig.fake.requests.slice(from).filter((r) => r.method === 'PUT' && /\/pods\/[^/]+$/.test(r.path));
    assert.equal(relabels.length, fns.length, `one relabel per call: ${relabels.map((r) => r.path.split('/').pop()).join(', ')}`);
  });
});
