// The Kubernetes client against the fake API server, where the fake behaves
// as the real server does and the project's code must cope: 429 `storage is
// (re)initializing`, writes into a namespace that does not exist, `Warning`
// headers, and server-side apply.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type FakeKube, type FakeResource, NAMESPACE_RESOURCE, startFakeKube } from '../../test/fake-kube/server.ts';
import { createKubeClient, type KubeClient, type KubeObject, parseWarnings } from './kube-client.ts';

const SECRETS = { group: '', version: 'v1', resource: 'secrets' };
const NAMESPACES = { group: '', version: 'v1', resource: 'namespaces' };
const PODS = { group: '', version: 'v1', resource: 'pods' };
const SECRET_RESOURCE: FakeResource = {
  group: '',
  version: 'v1',
  resource: 'secrets',
  kind: 'Secret',
  unknownFields: (o) => Object.keys(o).filter((k) => !['apiVersion', 'kind', 'metadata', 'data', 'type'].includes(k)),
};
const POD_RESOURCE: FakeResource = { group: '', version: 'v1', resource: 'pods', kind: 'Pod' };

const secret = (name: string, extra: Record<string, unknown> = {}): KubeObject => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, data: { k: 'dg==' }, ...extra });

describe('kube client', () => {
  let fake: FakeKube;
  let client: KubeClient;
  const warnings: string[] = [];

  before(async () => {
    fake = await startFakeKube({ resources: [SECRET_RESOURCE, POD_RESOURCE, NAMESPACE_RESOURCE], requireNamespaces: true });
    client = createKubeClient({ baseUrl: fake.url, onWarning: (w, r) => warnings.push(`${r.method} ${w}`) });
    await client.create(NAMESPACES, undefined, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'flint' } });
    fake.put('pods', { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'flint' }, spec: { containers: [{ name: 'c' }] } });
    fake.setPodLogs((_ns, _pod, _c, _follow, out) => {
      out.write('a line\n');
      return () => {};
    });
  });
  after(() => fake.close());

  it('waits as a 429 says and asks again, for every kind of call, writes included', async () => {
    const calls: Array<[string, string, () => Promise<unknown>]> = [
      ['POST', '/secrets', () => client.create(SECRETS, 'flint', secret('s'))],
      ['GET', '/secrets/s', () => client.get(SECRETS, 'flint', 's')],
      ['GET', '/secrets', () => client.list(SECRETS, 'flint')],
      [
        'PUT',
        '/secrets/s',
        async () => {
          const s = await client.get<KubeObject>(SECRETS, 'flint', 's');
          return client.replace(SECRETS, 'flint', 's', { ...(s as KubeObject), data: { k: 'dw==' } });
        },
      ],
      ['PATCH', '/secrets/s', () => client.apply(SECRETS, 'flint', 's', secret('s'))],
      ['DELETE', '/secrets/s', () => client.delete(SECRETS, 'flint', 's')],
      [
        'GET',
        '/pods/p/log',
        async () => {
          const lines: string[] = [];
          await client.podLog('flint', 'p', { container: 'c' }, (l) => lines.push(l)).done;
          assert.deepEqual(lines, ['a line']);
        },
      ],
      [
        'GET',
        '/pods',
        async () => {
          const list = await client.list(PODS, 'flint');
          const w = client.watch(PODS, 'flint', { resourceVersion: list.metadata.resourceVersion as string, timeoutSeconds: 1 }, () => {});
          await w.done;
        },
      ],
    ];
    for (const [method, path, run] of calls) {
      const before = fake.requests.length;
      fake.failNext({ method, path }, 429, 2, { retryAfterSeconds: 0.1 });
      await run();
      const tried = fake.requests.slice(before).filter((r) => r.method === method && r.path.includes(path));
      assert.ok(tried.length >= 3, `${method} ${path}: two refusals, then the answer (${tried.length} requests)`);
    }
  });

  it('waits out a 503 that names a retry time (paths not installed yet after a restart), but not a plain 503', async () => {
    fake.failNext({ method: 'GET', path: '/secrets' }, 503, 2, { retryAfterSeconds: 0.1 });
    await client.list(SECRETS, 'flint');
    fake.failNext({ method: 'GET', path: '/secrets' }, 503, 1);
    await assert.rejects(client.list(SECRETS, 'flint'), (err: any) => err.code === 'FLINT_ERR_UNAVAILABLE' && err.httpStatus === 503);
  });

  it('gives up on a 429 that lasts past its budget, saying so', async () => {
    const impatient = createKubeClient({ baseUrl: fake.url, retryBudgetMs: 500 });
    fake.failNext({ method: 'GET', path: '/secrets' }, 429, 100, { retryAfterSeconds: 0.1 });
    try {
      await assert.rejects(impatient.list(SECRETS, 'flint'), (err: any) => {
        assert.equal(err.code, 'FLINT_ERR_TOO_MANY_REQUESTS');
        assert.match(err.message, /storage is \(re\)initializing \(still refused after \d+ attempts/);
        return true;
      });
    } finally {
      fake.clearFailures();
    }
  });

  it('names the namespace when a write goes to one that does not exist', async () => {
    await assert.rejects(client.create(SECRETS, 'nowhere', secret('router')), (err: any) => {
      assert.equal(err.code, 'FLINT_ERR_NAMESPACE_NOT_FOUND');
      assert.match(err.message, /^namespace 'nowhere' does not exist .*kubectl create namespace nowhere/);
      return true;
    });
    // A missing object in an existing namespace is still just missing.
    await assert.rejects(client.replace(SECRETS, 'flint', 'absent', secret('absent')), (err: any) => err.code === 'FLINT_ERR_NOT_FOUND');
  });

  it('reports the Warning headers of an answer, one by one', async () => {
    warnings.length = 0;
    await client.create(SECRETS, 'flint', secret('warned', { foo: 1, bar: 2 }));
    assert.deepEqual(warnings, ['POST unknown field "foo"', 'POST unknown field "bar"']);
    assert.deepEqual(parseWarnings('299 - "unknown field \\"spec.x\\"", 299 - "y"'), ['unknown field "spec.x"', 'y']);
    await client.delete(SECRETS, 'flint', 'warned');
  });

  it('applies server-side: creates, then writes over whatever version is stored', async () => {
    const created = await client.apply(SECRETS, 'flint', 'applied', secret('applied'));
    fake.put('secrets', { ...created, metadata: { ...created.metadata, labels: { other: 'writer' } } });
    const updated = await client.apply<KubeObject>(SECRETS, 'flint', 'applied', secret('applied', { data: { k: 'eA==' } }));
    assert.equal((updated as any).data.k, 'eA==');
    assert.equal(updated.metadata.labels?.other, 'writer', "another manager's field stays");
    const patch = fake.requests.filter((r) => r.method === 'PATCH').at(-1);
    assert.match(patch?.path ?? '', /\?fieldManager=flint&force=true$/);
  });
});
