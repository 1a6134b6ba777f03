import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { type FakeKube, INGRESS_RESOURCE, startFakeKube } from '../../test/fake-kube/server.ts';
import { ingressSchemaErrors } from '../../test/fake-kube/schema.ts';
import type { HTTPTrigger, HTTPTriggerSpec, Secret } from '../api/kinds.ts';
import { applyIngressFlags, type IngressFlagValues } from './flags.ts';
import { createKubeClient, INGRESS_GVR, type KubeClient } from '../store/kube-client.ts';
import { createKubernetesIngressProvider, type IngressObject, MANAGED_BY_LABEL, OWNED_ANNOTATIONS, toIngressObject } from './kubernetes.ts';
import { type Outcome, ingress, runIngressProviderContract, type SendRequest } from './provider.contract.ts';
import { deriveIngresses, type IngressProvider } from './provider.ts';

const TOKEN = 'test-token';

function startFake(): Promise<FakeKube> {
  // The fake API server refuses what the real one would: every object is checked against the Ingress schema.
  return startFakeKube({ token: TOKEN, resources: [{ ...INGRESS_RESOURCE, validate: ingressSchemaErrors }] });
}

/**
 * How a request would fare through the Ingress objects, reading an
 * ImplementationSpecific path as ingress-nginx does: a plain prefix ('/*'
 * stands for everything below). The router gets the original path.
 */
function resolve(objects: IngressObject[], req: SendRequest): Outcome {
  const host = req.host.replace(/:\d+$/, '').toLowerCase();
  const [p] = req.path.split('?');
  for (const o of objects) {
    for (const rule of o.spec.rules) {
      const h = rule.host;
      const hostOk = !h || h === host || (h.startsWith('*.') && host.endsWith(h.slice(1)) && !host.slice(0, -h.length + 1).includes('.'));
      if (!hostOk) continue;
      for (const hp of rule.http.paths) {
        const base = hp.path.endsWith('/*') ? hp.path.slice(0, -1) : hp.path;
        if (p === hp.path.replace(/\/\*$/, '') || p.startsWith(base)) {
          return { kind: 'router', status: 200, received: { method: req.method ?? 'GET', url: req.path, headers: { host: req.host }, body: req.body ?? '' } };
        }
      }
    }
  }
  return { kind: 'default', status: 404 };
}

let contractFake: FakeKube | undefined;
runIngressProviderContract('kubernetes', {
  async setup() {
    contractFake = await startFake();
    const fake = contractFake;
    const provider = createKubernetesIngressProvider({ client: createKubeClient({ baseUrl: fake.url, token: TOKEN }) });
    await provider.start();
    return {
      provider,
      send: async (req) => resolve(fake.objects('ingresses', 'flint'), req),
      capabilities: { traffic: false, https: false, rewrite: false, strictPaths: false },
    };
  },
  async teardown() {
    await contractFake?.close();
  },
});

function trigger(name: string, spec: Partial<HTTPTriggerSpec>, namespace = 'default'): HTTPTrigger {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'HTTPTrigger',
    metadata: { name, namespace, uid: name, resourceVersion: '1', generation: 1, creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: { functionref: { type: 'name', name: 'hello' }, methods: ['GET'], ...spec },
  };
}

function tlsSecret(name: string): Secret {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Secret',
    metadata: { name, namespace: 'default', uid: name, resourceVersion: '1', generation: 1, creationTimestamp: '2026-01-01T00:00:00Z' },
    data: { 'tls.crt': '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n', 'tls.key': '-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n' },
  };
}

describe('kubernetes provider', () => {
  let fake: FakeKube;
  let client: KubeClient;
  let provider: IngressProvider;

  before(async () => {
    fake = await startFake();
    client = createKubeClient({ baseUrl: fake.url, token: TOKEN });
  });
  after(async () => {
    await fake.close();
  });
  beforeEach(async () => {
    provider = createKubernetesIngressProvider({ client });
    await provider.apply([]);
    for (const o of fake.objects('ingresses')) await client.delete(INGRESS_GVR, o.metadata.namespace, o.metadata.name);
  });

  it('writes every flag combination as a schema-valid Ingress the API server accepts', async () => {
    const routes: Array<Partial<HTTPTriggerSpec>> = [{ relativeurl: '/hello' }, { prefix: '/api' }, { prefix: '/api/' }, { relativeurl: '/users/{id}' }];
    const rules = [undefined, '-', '*=/hello', 'example.com=/hello', '*.example.com=/x/*', 'a.example.com=/*', '*=/v1/{name}'];
    const annotations = [undefined, ['nginx.ingress.kubernetes.io/rewrite-target=/', 'example.com/team=blue', 'plain=']];
    const tls = [undefined, 'web-tls', '-'];
    let n = 0;
    const seen = new Set<string>();
    for (const route of routes) {
      for (const rule of rules) {
        for (const ann of annotations) {
          for (const t of tls) {
            const flags: IngressFlagValues = { createingress: true, ingressrule: rule, ingressannotation: ann, ingresstls: t };
            const { spec } = applyIngressFlags(route as HTTPTriggerSpec, flags);
            const name = `r${n++}`;
            const { desired, problems } = deriveIngresses([trigger(name, { ...spec, functionref: { type: 'name', name: 'hello' } })], (_ns, s) =>
              s === 'web-tls' ? tlsSecret(s) : undefined,
            );
            assert.deepEqual(problems, [], `${JSON.stringify(flags)} on ${JSON.stringify(route)}`);
            const obj = toIngressObject(desired[0]);
            const errors = ingressSchemaErrors(obj);
            assert.deepEqual(errors, [], `${JSON.stringify(flags)} on ${JSON.stringify(route)} gives ${JSON.stringify(obj)}`);
            const r = obj.spec.rules[0];
            const p = r.http.paths[0];
            assert.equal(p.pathType, 'ImplementationSpecific');
            assert.deepEqual(p.backend, { service: { name: 'router', port: { number: 80 } } });
            assert.equal(obj.metadata.namespace, 'flint');
            assert.equal(obj.metadata.name, name);
            assert.deepEqual(
              { f: obj.metadata.labels?.functionName, t: obj.metadata.labels?.triggerName, ns: obj.metadata.labels?.triggerNamespace },
              { f: 'hello', t: name, ns: 'default' },
            );
            const wantHost = rule && rule !== '-' ? rule.split('=')[0] : '*';
            if (wantHost === '*') assert.equal(r.host, undefined, 'any host: no host field');
            else assert.equal(r.host, wantHost);
            const wantPath = rule && rule !== '-' ? rule.split('=')[1] : (route.prefix ?? route.relativeurl);
            assert.equal(p.path, wantPath);
            if (t === 'web-tls') {
              assert.deepEqual(obj.spec.tls, [wantHost === '*' ? { secretName: 'web-tls' } : { hosts: [wantHost], secretName: 'web-tls' }]);
            } else assert.equal(obj.spec.tls, undefined);
            if (ann) assert.equal(obj.metadata.annotations?.['example.com/team'], 'blue');
            else assert.equal(obj.metadata.annotations, undefined);
            seen.add(JSON.stringify([r.host ?? '', p.path, !!obj.spec.tls, !!obj.metadata.annotations]));
          }
        }
      }
    }
    // And the API server takes them all.
    const all = Array.from({ length: n }, (_, i) => i);
    assert.ok(seen.size >= 30, `only ${seen.size} distinct shapes`);
    const desired = all.map((i) => ingress(`r${i}`, { host: i % 2 ? 'example.com' : '', path: i % 3 ? '/x/*' : '/x', annotations: { 'a.b/c': String(i) } }));
    const result = await provider.apply(desired);
    assert.deepEqual(result.skipped, []);
    assert.equal(fake.objects('ingresses', 'flint').length, n);
  });

  it('creates, updates and deletes the Ingress with the route', async () => {
    await provider.apply([ingress('web', { host: 'a.example.com', annotations: { 'k/one': '1' } })]);
    let [obj] = fake.objects('ingresses', 'flint');
    assert.equal(obj.metadata.name, 'web');
    assert.equal(obj.metadata.labels[MANAGED_BY_LABEL], 'flint');
    assert.equal(obj.metadata.annotations[OWNED_ANNOTATIONS], 'k/one');
    const rv = obj.metadata.resourceVersion;

    await provider.apply([ingress('web', { host: 'a.example.com', annotations: { 'k/one': '1' } })]);
    [obj] = fake.objects('ingresses', 'flint');
    assert.equal(obj.metadata.resourceVersion, rv, 'no write when nothing changed');

    await provider.apply([ingress('web', { host: 'b.example.com', path: '/b/*', annotations: { 'k/two': '2' } })]);
    [obj] = fake.objects('ingresses', 'flint');
    assert.equal(obj.spec.rules[0].host, 'b.example.com');
    assert.equal(obj.spec.rules[0].http.paths[0].path, '/b/*');
    assert.deepEqual(obj.metadata.annotations, { 'k/two': '2', [OWNED_ANNOTATIONS]: 'k/two' }, 'a removed annotation is removed');
    assert.equal(obj.metadata.generation, 2);

    await provider.apply([]);
    assert.deepEqual(fake.objects('ingresses', 'flint'), []);
  });

  it("keeps annotations and fields other tools added, and never touches Ingresses it does not manage", async () => {
    await provider.apply([ingress('web', { annotations: { 'mine/a': '1' } })]);
    const [obj] = fake.objects('ingresses', 'flint');
    obj.metadata.annotations['cert-manager.io/issuer'] = 'letsencrypt';
    obj.spec.ingressClassName = 'nginx';
    fake.put('ingresses', obj);
    fake.put('ingresses', { apiVersion: 'networking.k8s.io/v1', kind: 'Ingress', metadata: { name: 'theirs', namespace: 'flint' }, spec: { defaultBackend: { service: { name: 'x', port: { number: 80 } } } } });

    await provider.apply([ingress('web', { annotations: { 'mine/b': '2' } })]);
    const web = fake.objects('ingresses', 'flint').find((o) => o.metadata.name === 'web');
    assert.deepEqual(web.metadata.annotations, { 'cert-manager.io/issuer': 'letsencrypt', 'mine/b': '2', [OWNED_ANNOTATIONS]: 'mine/b' });
    assert.equal(web.spec.ingressClassName, 'nginx');

    const res = await provider.apply([ingress('theirs')]);
    assert.match(res.skipped.find((s) => s.name === 'theirs')?.reason ?? '', /does not manage/);
    await provider.apply([]);
    assert.deepEqual(
      fake.objects('ingresses', 'flint').map((o) => o.metadata.name),
      ['theirs'],
    );
  });

  it('retries a replace that lost a race, and reports API failures so the controller retries', async () => {
    await provider.apply([ingress('race')]);
    fake.failNext({ method: 'PUT' }, 409);
    await provider.apply([ingress('race', { path: '/raced' })]);
    assert.equal(fake.objects('ingresses', 'flint')[0].spec.rules[0].http.paths[0].path, '/raced');

    fake.failNext({ method: 'POST' }, 500);
    await assert.rejects(provider.apply([ingress('race', { path: '/raced' }), ingress('other')]), /could not be written/);
    await provider.apply([ingress('race', { path: '/raced' }), ingress('other')]);
    assert.equal(fake.objects('ingresses', 'flint').length, 2);
  });

  it('removes Ingresses a previous run left behind, and refuses a wrong token', async () => {
    await provider.apply([ingress('old'), ingress('kept')]);
    const fresh = createKubernetesIngressProvider({ client });
    await fresh.apply([ingress('kept')]);
    assert.deepEqual(
      fake.objects('ingresses', 'flint').map((o) => o.metadata.name),
      ['kept'],
    );
    const bad = createKubernetesIngressProvider({ client: createKubeClient({ baseUrl: fake.url, token: 'wrong' }) });
    await assert.rejects(bad.apply([]), (err: any) => err.code === 'FLINT_ERR_UNAUTHORIZED' && err.httpStatus === 401);
  });
});

describe('kube client against the fake API server', () => {
  let fake: FakeKube;
  let client: KubeClient;
  before(async () => {
    fake = await startFakeKube({ token: TOKEN });
    client = createKubeClient({ baseUrl: fake.url, token: () => TOKEN });
  });
  after(async () => {
    await fake.close();
  });

  const obj = (name: string, labels: Record<string, string> = {}): IngressObject => ({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name, labels },
    spec: { rules: [{ http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'router', port: { number: 80 } } } }] } }] },
  });

  it('speaks the API: 404 as undefined, 409 on a taken name or a stale version, label selectors', async () => {
    assert.equal(await client.get(INGRESS_GVR, 'flint', 'nope'), undefined);
    assert.equal(await client.delete(INGRESS_GVR, 'flint', 'nope'), false);
    const a = await client.create(INGRESS_GVR, 'flint', obj('a', { team: 'x' }));
    assert.equal(a.metadata.namespace, 'flint');
    assert.ok(a.metadata.resourceVersion);
    await assert.rejects(client.create(INGRESS_GVR, 'flint', obj('a')), (err: any) => err.code === 'FLINT_ERR_ALREADY_EXISTS' && err.reason === 'AlreadyExists');
    await client.create(INGRESS_GVR, 'flint', obj('b', { team: 'y' }));
    const listed = await client.list(INGRESS_GVR, 'flint', { labelSelector: 'team=x' });
    assert.deepEqual(
      listed.items.map((i) => i.metadata.name),
      ['a'],
    );
    const updated = await client.replace(INGRESS_GVR, 'flint', 'a', { ...a, metadata: { ...a.metadata, labels: { team: 'z' } } });
    assert.notEqual(updated.metadata.resourceVersion, a.metadata.resourceVersion);
    await assert.rejects(client.replace(INGRESS_GVR, 'flint', 'a', a), (err: any) => err.code === 'FLINT_ERR_CONFLICT' && err.httpStatus === 409);
    await assert.rejects(client.replace(INGRESS_GVR, 'flint', 'zz', obj('zz')), (err: any) => err.code === 'FLINT_ERR_NOT_FOUND');
    assert.equal(await client.delete(INGRESS_GVR, 'flint', 'a'), true);
    assert.equal(await client.get(INGRESS_GVR, 'flint', 'a'), undefined);
    await assert.rejects(
      client.list({ group: 'example.com', version: 'v1', resource: 'widgets' }, 'flint'),
      (err: any) => err.code === 'FLINT_ERR_NOT_FOUND',
    );
  });

  it('reports an unreachable API server', async () => {
    const down = createKubeClient({ baseUrl: 'http://127.0.0.1:1', timeoutMs: 2000 });
    await assert.rejects(down.list(INGRESS_GVR, 'flint'), (err: any) => err.code === 'FLINT_ERR_UNREACHABLE');
  });
});
