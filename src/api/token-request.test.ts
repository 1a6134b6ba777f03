import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_TOKEN_TTL_SECONDS, parseTtl, validateTokenRequest } from './token-request.ts';

describe('token request', () => {
  it('reads durations with units, and refuses what is not one or is too long', () => {
    assert.equal(parseTtl('90s'), 90);
    assert.equal(parseTtl('1h30m'), 5400);
    assert.equal(parseTtl('24h'), MAX_TOKEN_TTL_SECONDS);
    for (const bad of ['1x', '10', '', 'h', '1.5h', '-1h', '0s', '25h', '1441m']) assert.throws(() => parseTtl(bad), { code: 'FLINT_ERR_VALIDATION', field: 'ttl' }, bad);
  });

  it('normalizes a scoped router token request', () => {
    assert.deepEqual(validateTokenRequest({ functions: ['hello', 'hello', 'b'], namespace: 'ns', methods: ['get', 'POST'], ttl: '1h' }), {
      audience: 'router',
      functions: ['ns/hello', 'ns/b'],
      methods: ['GET', 'POST'],
      ttlSeconds: 3600,
    });
    assert.deepEqual(validateTokenRequest(undefined), { audience: 'router', functions: undefined, methods: undefined, ttlSeconds: undefined });
    assert.deepEqual(validateTokenRequest({ audience: 'control-plane' }).audience, 'control-plane');
    assert.deepEqual(validateTokenRequest({ functions: ['a'] }).functions, ['default/a']);
  });

  it('refuses bad fields, naming them', () => {
    const cases: Array<[unknown, string]> = [
      [{ audience: 'everything' }, 'audience'],
      [{ functions: [''] }, 'functions[0]'],
      [{ functions: ['ok', 'Not_A_Name'] }, 'functions[1]'],
      [{ functions: [] }, 'functions'],
      [{ functions: 'hello' }, 'functions'],
      [{ methods: ['FETCH'] }, 'methods[0]'],
      [{ namespace: 'ns' }, 'namespace'],
      [{ functions: ['a'], namespace: 'Bad' }, 'namespace'],
      [{ audience: 'control-plane', functions: ['a'] }, 'functions'],
      [{ audience: 'control-plane', methods: ['GET'] }, 'methods'],
      [{ ttl: 60 }, 'ttl'],
      [{ ttl: '1x' }, 'ttl'],
      [{ scope: 'all' }, 'scope'],
      [{ functions: Array.from({ length: 51 }, (_, i) => `f${i}`) }, 'functions'],
    ];
    for (const [body, field] of cases) assert.throws(() => validateTokenRequest(body), { code: 'FLINT_ERR_VALIDATION', field }, JSON.stringify(body));
    assert.throws(() => validateTokenRequest([]), { code: 'FLINT_ERR_VALIDATION' });
  });
});
