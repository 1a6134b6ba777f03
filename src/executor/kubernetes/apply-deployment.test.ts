// Deployment writes against the fake API server, which fills defaults into
// what it stores as the real one does: an unchanged Deployment gets no write,
// a changed one one apply that no concurrent status write can conflict with.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Environment } from '../../api/kinds.ts';
import { DEPLOYMENT_RESOURCE } from '../../../test/fake-kube/kubelet.ts';
import { startFakeKube } from '../../../test/fake-kube/server.ts';
import { createKubeClient, type KubeObject } from '../../store/kube-client.ts';
import { APPLIED_HASH, applyDeployment, DEPLOYMENTS } from './apply-deployment.ts';
import { poolDeployment } from './pool-deployment.ts';

const env = (image: string): Environment =>
  ({
    apiVersion: 'flint.dev/v1',
    kind: 'Environment',
    metadata: { name: 'node', namespace: 'default', uid: 'u-1', resourceVersion: '7' },
    spec: { runtime: { image }, poolsize: 2 },
  }) as Environment;
const opts = { namespace: 'fn', fetcherImage: 'ghcr.io/flint/flint:1', enableIstio: false, poolSize: 3 };

describe('applying Deployments', () => {
  it('writes once, then not at all while nothing changes, though the server filled in defaults', async () => {
    const fake = await startFakeKube({ resources: [DEPLOYMENT_RESOURCE] });
    try {
      const client = createKubeClient({ baseUrl: fake.url });
      const desired = poolDeployment(env('node:1'), opts);
      assert.equal(await applyDeployment(client, desired), 'created');
      const stored = await client.get<KubeObject>(DEPLOYMENTS, 'fn', desired.metadata.name);
      assert.notDeepEqual((stored as any).spec.template, (desired.spec as any).template, 'the server defaulted the template');
      assert.ok(stored?.metadata.annotations?.[APPLIED_HASH]);
      const writes = () => fake.requests.filter((r) => r.method !== 'GET').length;
      const before = writes();
      for (let i = 0; i < 5; i++) assert.equal(await applyDeployment(client, poolDeployment(env('node:1'), opts)), 'unchanged');
      assert.equal(writes(), before);
    } finally {
      await fake.close();
    }
  });

  it('applies a change over a Deployment the controller keeps writing, without a conflict', async () => {
    const fake = await startFakeKube({ resources: [DEPLOYMENT_RESOURCE] });
    try {
      const client = createKubeClient({ baseUrl: fake.url });
      await applyDeployment(client, poolDeployment(env('node:1'), opts));
      const read = await client.get<KubeObject>(DEPLOYMENTS, 'fn', poolDeployment(env('node:1'), opts).metadata.name);
      // The Deployment controller writes status and its revision annotation after Flint read the object.
      fake.put('deployments', { ...read, metadata: { ...read?.metadata, annotations: { ...read?.metadata.annotations, 'deployment.kubernetes.io/revision': '1' } }, status: { replicas: 2 } });
      assert.equal(await applyDeployment(client, poolDeployment(env('node:2'), opts), read), 'updated');
      const after = await client.get<any>(DEPLOYMENTS, 'fn', read?.metadata.name as string);
      assert.equal(after.spec.template.spec.containers[0].image, 'node:2');
      assert.equal(after.metadata.annotations['deployment.kubernetes.io/revision'], '1', "the controller's annotation stays");
      // Replicas alone (someone scaled it): written back, and nothing else needed.
      fake.put('deployments', { ...after, spec: { ...after.spec, replicas: 9 } });
      assert.equal(await applyDeployment(client, poolDeployment(env('node:2'), opts)), 'updated');
      assert.equal((await client.get<any>(DEPLOYMENTS, 'fn', after.metadata.name)).spec.replicas, 2);
      assert.equal(fake.requests.filter((r) => r.method === 'PUT').length, 0, 'no replace from an older read');
    } finally {
      await fake.close();
    }
  });
});
