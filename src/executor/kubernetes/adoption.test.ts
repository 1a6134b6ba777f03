// A pool pod outlives the executor that specialized it: the next executor
// adopts the pods serving their function's current code (the next call is
// warm, on the same pod) and deletes those of a function changed or deleted
// while no executor ran. Against the fake API server, with the fake kubelet
// running each pod's containers as sandboxed processes.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Environment, FunctionResource, Package } from '../../api/kinds.ts';
import { storeResources } from '../../../test/fake-kube/crd-resources.ts';
import { DEPLOYMENT_RESOURCE, type FakeKubelet, POD_RESOURCE, SERVICE_RESOURCE, startFakeKubelet } from '../../../test/fake-kube/kubelet.ts';
import { type FakeKube, startFakeKube } from '../../../test/fake-kube/server.ts';
import { sandboxAvailable } from '../../sandbox/bwrap.ts';
import { createKubeClient, type KubeClient } from '../../store/kube-client.ts';
import { type KubeStore, openKubeStore } from '../../store/kubernetes.ts';
import { eventually } from '../../testing/eventually.ts';
import type { Lease } from '../types.ts';
import { SPECIALIZED_FOR } from './adoption.ts';
import { createKubeExecutor, type KubeExecutor } from './kube-executor.ts';

const FN_NS = 'flint-function';
const FETCHER = 'ghcr.io/flint/flint:test';
const usable = await sandboxAvailable();

const literal = (body: string) => ({ type: 'literal' as const, literal: Buffer.from(`module.exports = async () => ({ status: 200, body: '${body}' });\n`).toString('base64') });

function pkg(name: string, body: string): Package {
  return { apiVersion: 'flint.dev/v1', kind: 'Package', metadata: { name, namespace: 'default' } as Package['metadata'], spec: { environment: { name: 'node' }, deployment: literal(body) } };
}

function fn(name: string, spec: Partial<FunctionResource['spec']> = {}): FunctionResource {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Function',
    metadata: { name, namespace: 'default' } as FunctionResource['metadata'],
    spec: { environment: { name: 'node' }, package: { packageref: { name } }, ...spec },
  };
}

const NEWDEPLOY = { invokeStrategy: { strategyType: 'execution', executionStrategy: { executorType: 'newdeploy', minScale: 1, maxScale: 2 } } } as Partial<FunctionResource['spec']>;

async function call(lease: Lease): Promise<string> {
  const res = await fetch(`http://${lease.address}/`);
  return `${res.status} ${await res.text()}`;
}

describe('adopting the pool pods an earlier executor specialized', { skip: !usable && 'bubblewrap is not usable here' }, () => {
  let fake: FakeKube;
  let client: KubeClient;
  let store: KubeStore;
  let kubelet: FakeKubelet;
  const running: KubeExecutor[] = [];
  const executor = () => {
    const e = createKubeExecutor({ store, client, logger: pino({ level: 'silent' }), functionNamespace: FN_NS, fetcherImage: FETCHER, controllerUrl: 'http://127.0.0.1:1', reapIntervalMs: 100 });
    running.push(e);
    return e;
  };
  const podNames = () => fake.objects('pods', FN_NS).filter((p) => !p.metadata.deletionTimestamp).map((p) => p.metadata.name as string);

  before(async () => {
    fake = await startFakeKube({ resources: [...storeResources(), DEPLOYMENT_RESOURCE, POD_RESOURCE, SERVICE_RESOURCE] });
    client = createKubeClient({ baseUrl: fake.url });
    store = await openKubeStore({ client });
    kubelet = startFakeKubelet({ client, fetcherImage: FETCHER });
    const env: Environment = {
      apiVersion: 'flint.dev/v1',
      kind: 'Environment',
      metadata: { name: 'node', namespace: 'default' } as Environment['metadata'],
      spec: { runtime: { image: 'ghcr.io/fission/node-env:latest' }, poolsize: 3 },
    };
    await store.create(env);
  });

  after(async () => {
    try {
      for (const e of running) await e.stop();
    } finally {
      await kubelet?.stop();
      await store?.close();
      await fake?.close();
    }
  });

  it('adopts the pods of current code and deletes those of changed or deleted functions', async () => {
    const first = executor();
    await first.start();
    const served = new Map<string, string>();
    const fns = new Map<string, FunctionResource>();
    for (const name of ['kept', 'changed', 'gone']) {
      await store.create(pkg(name, `${name} v1`));
      const f = await store.create(fn(name));
      fns.set(name, f);
      const lease = await first.acquire(f);
      assert.equal(await call(lease), `200 ${name} v1`);
      lease.release();
      served.set(name, lease.instanceId);
      const pod = fake.objects('pods', FN_NS).find((p) => p.metadata.name === lease.instanceId);
      assert.match(pod.metadata.annotations[SPECIALIZED_FOR], new RegExp(`^${f.metadata.uid}:`), 'the claim says what the pod is specialized for');
    }
    await first.stop();
    assert.ok([...served.values()].every((pod) => podNames().includes(pod)), 'a stopping executor leaves its pool pods');

    // While no executor runs: one function gets new code, one is deleted.
    const changed = (await store.get('Package', 'default', 'changed')) as Package;
    await store.update({ ...changed, spec: { ...changed.spec, deployment: literal('changed v2') } });
    await store.delete('Function', 'default', 'gone');

    const next = executor();
    await next.start();
    const warm = next.tryAcquire(fns.get('kept') as FunctionResource);
    assert.ok(warm, 'the current pod is leased at once, without a cold start');
    assert.equal(warm.instanceId, served.get('kept'));
    assert.equal(await call(warm), '200 kept v1');
    warm.release();
    await eventually(() => !podNames().includes(served.get('changed') as string) && !podNames().includes(served.get('gone') as string), 'the stale pods deleted');
    const fresh = await next.acquire((await store.get('Function', 'default', 'changed')) as FunctionResource);
    assert.equal(fresh.coldStart, true);
    assert.equal(await call(fresh), '200 changed v2');
    fresh.release();
  });

  it("adopts a newdeploy function's specialized pods, and replaces those of a function changed meanwhile", async () => {
    // One executor at a time, as the Lease has it: the last test's would hand out these pods too.
    for (const e of running.splice(0)) await e.stop();
    const first = executor();
    await first.start();
    const served = new Map<string, string>();
    const fns = new Map<string, FunctionResource>();
    for (const name of ['nd-kept', 'nd-changed']) {
      await store.create(pkg(name, `${name} v1`));
      const f = await store.create(fn(name, NEWDEPLOY));
      fns.set(name, f);
      const lease = await first.acquire(f);
      assert.equal(await call(lease), `200 ${name} v1`);
      lease.release();
      served.set(name, lease.instanceId);
      const pod = fake.objects('pods', FN_NS).find((p) => p.metadata.name === lease.instanceId);
      assert.equal(pod.metadata.labels.executorType, 'newdeploy');
      assert.match(pod.metadata.annotations[SPECIALIZED_FOR], new RegExp(`^${f.metadata.uid}:`), 'the hand-out says what the pod is specialized for');
    }
    await first.stop();
    assert.ok([...served.values()].every((pod) => podNames().includes(pod)), 'a stopping executor leaves the newdeploy pods it specialized');

    const changed = (await store.get('Package', 'default', 'nd-changed')) as Package;
    await store.update({ ...changed, spec: { ...changed.spec, deployment: literal('nd-changed v2') } });

    const next = executor();
    await next.start();
    const warm = next.tryAcquire(fns.get('nd-kept') as FunctionResource);
    assert.ok(warm, 'the current pod is leased at once, without a cold start');
    assert.equal(warm.instanceId, served.get('nd-kept'));
    assert.equal(await call(warm), '200 nd-kept v1');
    // Busy, so a second request must be handed another pod: the adopted one is never handed out twice.
    const second = await next.acquire(fns.get('nd-kept') as FunctionResource);
    assert.notEqual(second.instanceId, warm.instanceId);
    assert.equal(await call(second), '200 nd-kept v1');
    warm.release();
    second.release();
    await eventually(() => !podNames().includes(served.get('nd-changed') as string), "the changed function's pod deleted");
    const fresh = await next.acquire((await store.get('Function', 'default', 'nd-changed')) as FunctionResource);
    assert.notEqual(fresh.instanceId, served.get('nd-changed'));
    assert.equal(await call(fresh), '200 nd-changed v2');
    fresh.release();
  });

  it("sets a newdeploy function's Deployment to the pods it adopted", async () => {
    for (const e of running.splice(0)) await e.stop();
    const first = executor();
    await first.start();
    await store.create(pkg('nd-two', 'nd-two v1'));
    const f = await store.create(fn('nd-two', { ...NEWDEPLOY, requestsPerPod: 1 }));
    const deployment = () => fake.objects('deployments.apps', FN_NS).find((d) => d.metadata.labels?.functionUid === f.metadata.uid);
    // Two requests at once on one request per pod: two pods, two replicas.
    const [a, b] = await Promise.all([first.acquire(f), first.acquire(f)]);
    assert.notEqual(a.instanceId, b.instanceId);
    a.release();
    b.release();
    assert.equal(deployment()?.spec.replicas, 2);
    await first.stop();
    // While no executor runs, one of them goes (an eviction); its Deployment puts a generic pod in its place.
    await client.delete({ group: '', version: 'v1', resource: 'pods' }, FN_NS, b.instanceId);
    await eventually(() => !podNames().includes(b.instanceId), 'the evicted pod gone');

    const next = executor();
    await next.start();
    const warm = next.tryAcquire(f);
    assert.ok(warm, 'the remaining pod adopted');
    assert.equal(warm.instanceId, a.instanceId);
    warm.release();
    await eventually(() => deployment()?.spec.replicas === 1, 'the Deployment down to the one pod adopted (minScale 1), not the two the last leader had');
  });
});
