import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HTTPTrigger, HTTPTriggerSpec, Secret } from '../api/kinds.ts';
import { matchPath, parsePathRule, rewriteFor } from './paths.ts';
import { deriveIngresses, effectiveIngress, fingerprint, primaryFunction } from './provider.ts';

function trigger(name: string, spec: Partial<HTTPTriggerSpec>, o: { namespace?: string; created?: string } = {}): HTTPTrigger {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'HTTPTrigger',
    metadata: { name, namespace: o.namespace ?? 'default', uid: name, resourceVersion: '1', generation: 1, creationTimestamp: o.created ?? '2026-01-01T00:00:00Z' },
    spec: { functionref: { type: 'name', name: 'fn' }, relativeurl: '/hello', createingress: true, ...spec },
  };
}

const none = () => undefined;

describe('ingress paths', () => {
  it('matches exact paths, /* prefixes and route prefixes like the router', () => {
    const exact = parsePathRule('/hello');
    assert.ok(matchPath(exact, '/hello'));
    assert.equal(matchPath(exact, '/hello/x'), undefined);
    const star = parsePathRule('/api/*');
    for (const p of ['/api', '/api/', '/api/x/y']) assert.ok(matchPath(star, p), p);
    assert.equal(matchPath(star, '/apix'), undefined);
    const all = parsePathRule('/*');
    assert.ok(matchPath(all, '/anything'));
    const bare = parsePathRule('/api', { routePrefix: true });
    assert.ok(matchPath(bare, '/api'));
    assert.ok(matchPath(bare, '/api/x'));
    const slash = parsePathRule('/api/', { routePrefix: true });
    assert.equal(matchPath(slash, '/api'), undefined);
    assert.ok(matchPath(slash, '/api/x'));
    const tpl = parsePathRule('/users/{id:[0-9]+}');
    assert.deepEqual(matchPath(tpl, '/users/42')?.params, { id: '42' });
    assert.equal(matchPath(tpl, '/users/x'), undefined);
  });

  it('rewrites only when the ingress path differs from the route', () => {
    assert.equal(rewriteFor(parsePathRule('/hello'), { path: '/hello', prefix: false }), undefined);
    assert.equal(rewriteFor(parsePathRule('/api/*'), { path: '/api', prefix: true }), undefined);
    assert.equal(rewriteFor(parsePathRule('/p/hello'), { path: '/hello', prefix: false })?.('/p/hello', 8), '/hello');
    const pre = rewriteFor(parsePathRule('/pub/*'), { path: '/api/', prefix: true })!;
    assert.equal(pre('/pub/a/b', 4), '/api/a/b');
    assert.equal(pre('/pub', 4), '/api/');
    assert.equal(rewriteFor(parsePathRule('/u/{id}'), { path: '/users/{id}', prefix: false }), undefined, 'templates pass unchanged');
  });
});

describe('desired ingresses', () => {
  it('takes the ingress host and path, else the route host and url, each on its own', () => {
    assert.deepEqual(effectiveIngress({ relativeurl: '/a', functionref: {} }), { enabled: false, host: '', path: '/a', routePrefix: false, tls: '', annotations: {} });
    assert.equal(effectiveIngress({ relativeurl: '/a', host: 'R.example.com:8080', functionref: {} }).host, 'r.example.com');
    assert.equal(effectiveIngress({ relativeurl: '/a', host: 'r.com', ingressconfig: { host: '*' }, functionref: {} }).host, '');
    const e = effectiveIngress({ prefix: '/p', ingressconfig: { host: 'h.com' }, functionref: {} });
    assert.deepEqual([e.host, e.path, e.routePrefix], ['h.com', '/p', true]);
    assert.equal(effectiveIngress({ prefix: '/p', ingressconfig: { path: '/q/*' }, functionref: {} }).routePrefix, false);
  });

  it('derives one ingress per route with createingress, in the flint namespace with the labels', () => {
    const { desired, problems } = deriveIngresses(
      [trigger('a', {}), trigger('off', { createingress: false }), trigger('b', { prefix: '/api', ingressconfig: { annotations: { x: 'y' } } }, { namespace: 'team' })],
      none,
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(
      desired.map((d) => [d.name, d.namespace, d.labels, d.path, d.routePrefix, d.annotations]),
      [
        ['a', 'flint', { functionName: 'fn', triggerName: 'a', triggerNamespace: 'default' }, '/hello', false, {}],
        ['b', 'flint', { functionName: 'fn', triggerName: 'b', triggerNamespace: 'team' }, '/api', true, { x: 'y' }],
      ],
    );
  });

  it('keeps the oldest of two same-named routes and reports the other and bad settings', () => {
    const { desired, problems } = deriveIngresses(
      [
        trigger('dup', {}, { namespace: 'b', created: '2026-01-02T00:00:00Z' }),
        trigger('dup', {}, { namespace: 'a', created: '2026-01-03T00:00:00Z' }),
        trigger('dup', {}, { namespace: 'z', created: '2026-01-01T00:00:00Z' }),
        trigger('badpath', { ingressconfig: { path: 'x' } }),
        trigger('badhost', { ingressconfig: { host: 'Not Valid' } }),
      ],
      none,
    );
    assert.deepEqual(
      desired.map((d) => d.labels.triggerNamespace),
      ['z'],
    );
    assert.deepEqual(problems.map((p) => `${p.namespace}/${p.name}`).sort(), ['a/dup', 'b/dup', 'default/badhost', 'default/badpath']);
  });

  it('finds the TLS secret in the route namespace, then in flint, and says when it is unusable', () => {
    const secret = (ns: string, data: Record<string, string>): Secret => ({
      apiVersion: 'flint.dev/v1',
      kind: 'Secret',
      metadata: { name: 's', namespace: ns, uid: 'u', resourceVersion: '1', generation: 1, creationTimestamp: 'x' },
      data,
    });
    const pemCert = '-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n';
    const pemKey = '-----BEGIN PRIVATE KEY-----\nB\n-----END PRIVATE KEY-----\n';
    const lookup = (ns: string) => (ns === 'flint' ? secret('flint', { 'tls.crt': Buffer.from(pemCert).toString('base64'), 'tls.key': pemKey }) : undefined);
    const [d] = deriveIngresses([trigger('t', { ingressconfig: { tls: 's', host: 'h.com' } })], lookup).desired;
    assert.deepEqual(d.tls, { secretName: 's', hosts: ['h.com'], material: { cert: pemCert, key: pemKey } });
    const [e] = deriveIngresses([trigger('t', { ingressconfig: { tls: 's' } })], () => secret('default', { 'tls.crt': pemCert })).desired;
    assert.deepEqual([e.tls?.hosts, e.tls?.material, e.tls?.problem], [[], undefined, "secret must hold PEM 'tls.crt' and 'tls.key'"]);
    const [f] = deriveIngresses([trigger('t', { ingressconfig: { tls: 's' } })], none).desired;
    assert.equal(f.tls?.problem, 'secret not found');
  });

  it('labels a canary with its heaviest function, and fingerprints independent of key order', () => {
    assert.equal(primaryFunction({ functionref: { type: 'function-weights', functionweights: { a: 20, b: 80 } } }), 'b');
    assert.equal(fingerprint([{ a: 1, b: 2 } as any]), fingerprint([{ b: 2, a: 1 } as any]));
  });
});
