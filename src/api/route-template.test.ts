import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileTemplate, matchTemplate } from './route-template.ts';

describe('route templates', () => {
  it('matches literal exact and prefix templates', () => {
    const exact = compileTemplate('/hello', { prefix: false });
    assert.deepEqual(matchTemplate(exact, '/hello'), { params: {}, matchedLength: 6 });
    assert.equal(matchTemplate(exact, '/hello/x'), undefined);
    const prefix = compileTemplate('/api/', { prefix: true });
    assert.equal(matchTemplate(prefix, '/api/users')?.matchedLength, 5);
    assert.equal(matchTemplate(prefix, '/ap'), undefined);
  });

  it('captures one segment for {name} and a regex for {name:re}', () => {
    const t = compileTemplate('/users/{id}/files/{path:.+}', { prefix: false });
    assert.deepEqual(t.params, ['id', 'path']);
    assert.deepEqual(matchTemplate(t, '/users/42/files/a/b.txt')?.params, { id: '42', path: 'a/b.txt' });
    assert.equal(matchTemplate(t, '/users/4/2/files/x'), undefined);
    const digits = compileTemplate('/n/{n:[0-9]{2,3}}', { prefix: false });
    assert.deepEqual(matchTemplate(digits, '/n/123')?.params, { n: '123' });
    assert.equal(matchTemplate(digits, '/n/1'), undefined);
    const groups = compileTemplate('/sort/{dir:(asc|desc)}', { prefix: false });
    assert.deepEqual(matchTemplate(groups, '/sort/desc')?.params, { dir: 'desc' });
  });

  it('treats regex metacharacters in literal text literally', () => {
    const t = compileTemplate('/a.b/{x}', { prefix: false });
    assert.equal(matchTemplate(t, '/aXb/1'), undefined);
    assert.ok(matchTemplate(t, '/a.b/1'));
  });

  it('refuses malformed templates naming the field', () => {
    for (const bad of ['/u/{id', '/u/id}', '/u/{}', '/u/{1x}', '/u/{a}/{a}', '/u/{a:[}']) {
      assert.throws(() => compileTemplate(bad, { prefix: false, field: 'spec.relativeurl' }), (err: any) => {
        assert.equal(err.code, 'FLINT_ERR_VALIDATION');
        assert.equal(err.field, 'spec.relativeurl');
        return true;
      }, bad);
    }
  });
});
