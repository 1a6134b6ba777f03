import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FunctionResource, HTTPTrigger } from '../api/kinds.ts';
import { resolveInternal } from './internal-path.ts';
import { buildTable, compileTrigger, type MatchResult, paramHeaderName, resolveBackend, type RouteHit, RouteTable } from './route-table.ts';
import { FnTarget, functionKey, pickTarget, WeightedTargets } from './targets.ts';
import { fnObj, type RouteSpec, routeObj } from './testing/fixtures.ts';

function table(fns: FunctionResource[], routes: HTTPTrigger[]): RouteTable {
  const targets = new Map(fns.map((f) => [functionKey(f.metadata.namespace, f.metadata.name), new FnTarget(f)]));
  const built = [];
  for (const r of routes) {
    const backend = resolveBackend(r, targets);
    if (backend) built.push({ compiled: compileTrigger(r), backend });
  }
  return buildTable(built, targets);
}

const FNS = ['hello', 'a', 'b', 'c', 'd'].map((n) => fnObj(n));

function one(spec: RouteSpec, name = 'r'): RouteTable {
  return table(FNS, [routeObj(name, spec)]);
}

function hit(m: MatchResult): RouteHit {
  assert.ok(m && !('allow' in m), `expected a route hit, got ${JSON.stringify(m)}`);
  return m;
}

function fnOf(m: MatchResult): string {
  return pickTarget(hit(m).entry.backend).name;
}

describe('route table matching', () => {
  it('matches an exact relativeurl and nothing below or beside it', () => {
    const t = one({ relativeurl: '/hello' });
    assert.equal(hit(t.match('', '/hello', 'GET')).entry.prefix, false);
    assert.equal(t.match('', '/hello/', 'GET'), undefined);
    assert.equal(t.match('', '/hello/x', 'GET'), undefined);
    assert.equal(t.match('', '/hell', 'GET'), undefined);
  });

  it('treats a prefix without a trailing slash as the path itself plus its subtree', () => {
    const t = one({ prefix: '/api' });
    assert.ok(t.match('', '/api', 'GET'));
    assert.ok(t.match('', '/api/', 'GET'));
    assert.equal(hit(t.match('', '/api/users/1', 'GET')).matched, '/api/'.length);
    assert.equal(t.match('', '/apifoo', 'GET'), undefined);
  });

  it('treats a prefix with a trailing slash as the subtree only', () => {
    const t = one({ prefix: '/docs/' });
    assert.equal(t.match('', '/docs', 'GET'), undefined);
    assert.ok(t.match('', '/docs/', 'GET'));
    assert.ok(t.match('', '/docs/a/b', 'GET'));
  });

  it('captures {param} as one segment and {param:regex} as the regex, across slashes too', () => {
    const t = one({ relativeurl: '/users/{id}/files/{path:.+}' });
    const h = hit(t.match('', '/users/42/files/a/b.txt', 'GET'));
    assert.deepEqual(h.params, { id: '42', path: 'a/b.txt' });
    assert.deepEqual(h.entry.paramHeaders, ['X-Flint-Params-Id', 'X-Flint-Params-Path']);
    assert.equal(t.match('', '/users/4/2/files/x', 'GET'), undefined);
    const n = one({ relativeurl: '/n/{num:[0-9]+}' });
    assert.deepEqual(hit(n.match('', '/n/123', 'GET')).params, { num: '123' });
    assert.equal(n.match('', '/n/12a', 'GET'), undefined);
  });

  it('names parameter headers the way Go canonicalizes them', () => {
    assert.equal(paramHeaderName('userId'), 'X-Flint-Params-Userid');
    assert.equal(paramHeaderName('user-id'), 'X-Flint-Params-User-Id');
    assert.equal(paramHeaderName('user_id'), 'X-Flint-Params-User_id');
  });

  it('filters by method, GET by default, and reports the allowed ones', () => {
    const def = one({ relativeurl: '/m' });
    assert.ok(def.match('', '/m', 'GET'));
    assert.deepEqual(def.match('', '/m', 'POST'), { allow: 'GET' });
    const both = one({ relativeurl: '/m', methods: ['PUT', 'POST'], method: 'DELETE' });
    for (const m of ['PUT', 'POST', 'DELETE']) assert.ok(both.match('', '/m', m), m);
    assert.deepEqual(both.match('', '/m', 'GET'), { allow: 'POST, PUT, DELETE' });
    assert.deepEqual(both.match('', '/m', 'PROPFIND'), { allow: 'POST, PUT, DELETE' });
  });

  it('collects Allow across every route on the path', () => {
    const t = table(FNS, [routeObj('g', { relativeurl: '/x', methods: ['GET'] }), routeObj('p', { prefix: '/x', methods: ['POST'] })]);
    assert.deepEqual(t.match('', '/x', 'DELETE'), { allow: 'GET, POST' });
    assert.equal(fnOf(t.match('', '/x', 'POST')), 'hello');
  });

  it('matches a host exactly, port included, case-insensitively, and a wrong host is a 404', () => {
    const t = table(FNS, [routeObj('h', { relativeurl: '/h', host: 'api.example.com', fn: 'a' }), routeObj('p', { relativeurl: '/p', host: 'x.test:8080', fn: 'b' })]);
    assert.equal(fnOf(t.match('api.example.com', '/h', 'GET')), 'a');
    assert.equal(fnOf(t.match('API.Example.com', '/h', 'GET')), 'a');
    assert.equal(t.match('api.example.com:80', '/h', 'GET'), undefined);
    assert.equal(t.match('other.example.com', '/h', 'GET'), undefined);
    assert.equal(fnOf(t.match('x.test:8080', '/p', 'GET')), 'b');
    assert.equal(t.match('x.test', '/p', 'GET'), undefined);
  });

  it('matches a wildcard host for one more label, after an exact host and before routes without a host', () => {
    const t = table(FNS, [
      routeObj('wild', { relativeurl: '/w', host: '*.example.com', fn: 'a' }),
      routeObj('exact', { relativeurl: '/w', host: 'special.example.com', fn: 'b' }),
      routeObj('any', { relativeurl: '/w', fn: 'hello' }),
      routeObj('post', { relativeurl: '/only-post', host: '*.example.com', fn: 'a', methods: ['POST'] }),
    ]);
    assert.equal(fnOf(t.match('api.example.com', '/w', 'GET')), 'a');
    assert.equal(fnOf(t.match('API.example.COM', '/w', 'GET')), 'a');
    assert.equal(fnOf(t.match('special.example.com', '/w', 'GET')), 'b');
    assert.equal(fnOf(t.match('example.com', '/w', 'GET')), 'hello', 'the bare domain is not covered');
    assert.equal(fnOf(t.match('a.b.example.com', '/w', 'GET')), 'hello', 'only one label');
    assert.deepEqual(t.match('api.example.com', '/only-post', 'GET'), { allow: 'POST' });
  });

  it('ranks host exact, host prefix, exact, then prefixes longest first', () => {
    const t = table(FNS, [
      routeObj('prefix-short', { prefix: '/p', fn: 'd' }, { created: '2020-01-01T00:00:00Z' }),
      routeObj('prefix-long', { prefix: '/p/deep/', fn: 'c' }, { created: '2026-01-01T00:00:00Z' }),
      routeObj('exact', { relativeurl: '/p/deep/x', fn: 'b' }),
      routeObj('host-prefix', { prefix: '/p/', host: 'h.test', fn: 'a' }),
      routeObj('host-exact', { relativeurl: '/p/deep/x', host: 'h.test', fn: 'hello' }),
    ]);
    assert.equal(fnOf(t.match('h.test', '/p/deep/x', 'GET')), 'hello');
    assert.equal(fnOf(t.match('h.test', '/p/deep/y', 'GET')), 'a');
    assert.equal(fnOf(t.match('other', '/p/deep/x', 'GET')), 'b');
    assert.equal(fnOf(t.match('other', '/p/deep/y', 'GET')), 'c');
    assert.equal(fnOf(t.match('other', '/p/other', 'GET')), 'd');
  });

  it('breaks ties by oldest creationTimestamp, then namespace/name', () => {
    const older = routeObj('zz', { relativeurl: '/t/{x}', fn: 'a' }, { created: '2020-01-01T00:00:00Z' });
    const newer = routeObj('aa', { relativeurl: '/t/{y}', fn: 'b' }, { created: '2025-01-01T00:00:00Z' });
    assert.equal(fnOf(table(FNS, [newer, older]).match('', '/t/1', 'GET')), 'a');
    const n1 = routeObj('aa', { relativeurl: '/u/{x}', fn: 'a' });
    const n2 = routeObj('bb', { relativeurl: '/u/{y}', fn: 'b' });
    assert.equal(fnOf(table(FNS, [n2, n1]).match('', '/u/1', 'GET')), 'a');
  });

  it('lets an older template beat a newer literal on the same path, as the reference orders them', () => {
    const t = table(FNS, [
      routeObj('literal', { relativeurl: '/users/me', fn: 'b' }, { created: '2025-01-01T00:00:00Z' }),
      routeObj('template', { relativeurl: '/users/{id}', fn: 'a' }, { created: '2020-01-01T00:00:00Z' }),
    ]);
    assert.equal(fnOf(t.match('', '/users/me', 'GET')), 'a');
    // Methods filter rather than rank: the literal still serves what the template does not.
    const m = table(FNS, [
      routeObj('literal', { relativeurl: '/users/me', fn: 'b', methods: ['POST'] }, { created: '2025-01-01T00:00:00Z' }),
      routeObj('template', { relativeurl: '/users/{id}', fn: 'a' }, { created: '2020-01-01T00:00:00Z' }),
    ]);
    assert.equal(fnOf(m.match('', '/users/me', 'POST')), 'b');
  });

  it('skips a trigger whose function does not exist', () => {
    const t = table(FNS, [routeObj('r', { relativeurl: '/ghost', fn: 'nope' })]);
    assert.equal(t.size, 0);
    assert.equal(t.match('', '/ghost', 'GET'), undefined);
  });

  it('refuses malformed templates at compile time', () => {
    assert.throws(() => compileTrigger(routeObj('r', { relativeurl: '/u/{id' })), { code: 'FLINT_ERR_VALIDATION' });
  });
});

describe('canary weights', () => {
  it('picks by cumulative weight', () => {
    const [a, b] = [new FnTarget(fnObj('a')), new FnTarget(fnObj('b'))];
    const w = new WeightedTargets([
      [a, 30],
      [b, 70],
    ]);
    assert.equal(w.pick(0), a);
    assert.equal(w.pick(0.2999), a);
    assert.equal(w.pick(0.3), b);
    assert.equal(w.pick(0.9999), b);
  });

  it('resolves weighted references, dropping zero weights and waiting for every function', () => {
    const targets = new Map(FNS.map((f) => [functionKey('default', f.metadata.name), new FnTarget(f)]));
    const r = (weights: Record<string, number>) => routeObj('c', { relativeurl: '/c', functionref: { type: 'function-weights', functionweights: weights } });
    assert.ok(resolveBackend(r({ a: 50, b: 50 }), targets) instanceof WeightedTargets);
    assert.equal((resolveBackend(r({ a: 100, b: 0 }), targets) as FnTarget).name, 'a');
    assert.equal(resolveBackend(r({ a: 50, missing: 50 }), targets), undefined);
  });
});

describe('internal function path', () => {
  const fns = new Map(
    [fnObj('hello'), fnObj('a'), fnObj('b', { namespace: 'a' }), fnObj('fx', { namespace: 'ns1' })].map((f) => [
      functionKey(f.metadata.namespace, f.metadata.name),
      new FnTarget(f),
    ]),
  );
  const res = (p: string) => {
    const h = resolveInternal(p, fns);
    return h && `${h.target.key} ${h.forwardPath}`;
  };

  it('resolves default-namespace names with and without a sub-path', () => {
    assert.equal(res('/flint-function/hello'), 'default/hello /');
    assert.equal(res('/flint-function/hello/'), 'default/hello /');
    assert.equal(res('/flint-function/hello/sub/x'), 'default/hello /sub/x');
  });

  it('resolves namespaced names and prefers them when ambiguous', () => {
    assert.equal(res('/flint-function/ns1/fx'), 'ns1/fx /');
    assert.equal(res('/flint-function/ns1/fx/deep/er'), 'ns1/fx /deep/er');
    assert.equal(res('/flint-function/a/b'), 'a/b /');
    assert.equal(res('/flint-function/a/c'), 'default/a /c');
  });

  it('finds nothing for unknown functions or an empty name', () => {
    assert.equal(res('/flint-function/'), undefined);
    assert.equal(res('/flint-function/nope'), undefined);
    assert.equal(res('/flint-function/ns1/nope'), undefined);
  });
});

describe('route table', () => {
  it('starts empty', () => {
    assert.equal(RouteTable.empty.match('', '/x', 'GET'), undefined);
  });
});
