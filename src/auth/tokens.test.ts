import assert from 'node:assert/strict';
import { generateKeyPairSync, sign as rsaSign } from 'node:crypto';
import { describe, it } from 'node:test';
import { ARCHIVES_AUDIENCE, CONTROL_PLANE_AUDIENCE, ROUTER_AUDIENCE } from './audiences.ts';
import { createMintedTokenSource } from './minted.ts';
import { TokenScope } from './scope.ts';
import { eventually } from '../testing/eventually.ts';
import { craftToken, nowSeconds } from './testing.ts';
import { VerifiedTokenCache } from './token-cache.ts';
import { createTokenService, EXPIRED_TOKEN, INVALID_TOKEN, MALFORMED_TOKEN } from './tokens.ts';

const KEY = 'test-signing-key-0123456789abcdef0123456789';
const svc = () => createTokenService({ signingKey: KEY, issuer: 'flint', expirySeconds: 120 });

function decode(token: string): { header: any; payload: any } {
  const [h, p] = token.split('.');
  return { header: JSON.parse(Buffer.from(h, 'base64url').toString()), payload: JSON.parse(Buffer.from(p, 'base64url').toString()) };
}

describe('token service', () => {
  it('issues HS256 tokens with iss, sub, username, iat, nbf and exp that verify', () => {
    const tokens = svc();
    const token = tokens.issue('admin');
    const { header, payload } = decode(token);
    assert.equal(header.alg, 'HS256');
    assert.equal(payload.iss, 'flint');
    assert.equal(payload.sub, 'admin');
    assert.equal(payload.username, 'admin');
    assert.equal(payload.nbf, payload.iat);
    assert.equal(payload.exp, payload.iat + 120);
    const r = tokens.verify(token);
    assert.equal(r.ok, true);
    assert.ok(r.ok && r.subject === 'admin' && r.username === 'admin' && r.expiresAt === payload.exp * 1000);
  });

  it('mints short-lived tokens without a username claim', () => {
    const tokens = svc();
    const token = tokens.mint('flint:mqtrigger', 30);
    const { payload } = decode(token);
    assert.equal(payload.exp - payload.iat, 30);
    assert.equal(payload.username, undefined);
    const r = tokens.verify(token);
    assert.ok(r.ok && r.subject === 'flint:mqtrigger' && r.username === undefined);
    assert.throws(() => tokens.mint('x', 0), { code: 'FLINT_ERR_VALIDATION' });
    assert.throws(() => tokens.mint('x', 86400), { code: 'FLINT_ERR_VALIDATION' });
    assert.throws(() => tokens.mint(''), { code: 'FLINT_ERR_VALIDATION' });
  });

  it('gives every token one audience: router for logins and minted tokens unless told otherwise', () => {
    const tokens = svc();
    assert.equal(decode(tokens.issue('admin')).payload.aud, ROUTER_AUDIENCE);
    assert.equal(decode(tokens.mint('flint:mqtrigger', 30)).payload.aud, ROUTER_AUDIENCE);
    const fetcher = tokens.verify(tokens.mint('flint:fetcher', 30, ARCHIVES_AUDIENCE));
    assert.ok(fetcher.ok && fetcher.audience === ARCHIVES_AUDIENCE);
    const cp = tokens.issueFor({ audience: CONTROL_PLANE_AUDIENCE, username: 'admin', ttlSeconds: 600 });
    const r = tokens.verify(cp.token);
    assert.ok(r.ok && r.audience === CONTROL_PLANE_AUDIENCE && r.username === 'admin' && r.scope === undefined && r.expiresAt === cp.expiresAt);
  });

  it('carries a router token\'s scope through signing and verification, and refuses a scope it cannot read', () => {
    const tokens = svc();
    const issued = tokens.issueFor({ audience: ROUTER_AUDIENCE, username: 'admin', ttlSeconds: 60, scope: new TokenScope(['default/a', 'ns/b'], undefined) });
    assert.deepEqual(decode(issued.token).payload.flint_scope, { f: ['default/a', 'ns/b'] });
    const r = tokens.verify(issued.token);
    assert.ok(r.ok && r.scope !== undefined);
    assert.equal(r.scope.refusal('DELETE', 'ns/b'), undefined, 'no methods named: any method');
    assert.throws(() => tokens.issueFor({ audience: CONTROL_PLANE_AUDIENCE, username: 'admin', ttlSeconds: 60, scope: new TokenScope(['default/a'], undefined) }));
    for (const scope of [{}, { f: [] }, { f: 'default/a' }, { f: ['default/a'], x: 1 }, { m: [1] }, null, []]) {
      const token = craftToken({ alg: 'HS256', typ: 'JWT' }, { iss: 'flint', aud: ROUTER_AUDIENCE, exp: nowSeconds() + 60, flint_scope: scope }, KEY);
      assert.deepEqual(tokens.verify(token), { ok: false, message: INVALID_TOKEN }, JSON.stringify(scope));
    }
  });

  it('refuses an empty signing key or issuer and a bad expiry', () => {
    assert.throws(() => createTokenService({ signingKey: '', issuer: 'flint', expirySeconds: 1 }), { code: 'FLINT_ERR_CONFIG' });
    assert.throws(() => createTokenService({ signingKey: 'k', issuer: '', expirySeconds: 1 }), { code: 'FLINT_ERR_CONFIG' });
    assert.throws(() => createTokenService({ signingKey: 'k', issuer: 'i', expirySeconds: 0 }), { code: 'FLINT_ERR_CONFIG' });
  });

  it('answers absent and malformed tokens with the malformed message', () => {
    const tokens = svc();
    for (const bad of [undefined, '', 'garbage', 'a.b', 'a.b.c.d', 'a$b.c.d', '..', `${'a'.repeat(5000)}.b.c`, 'e30.e30x.!!']) {
      assert.deepEqual(tokens.verify(bad), { ok: false, message: MALFORMED_TOKEN }, String(bad));
    }
    // Three base64url parts that are not JSON.
    assert.equal((tokens.verify('bm90anNvbg.bm90anNvbg.c2ln') as any).message, MALFORMED_TOKEN);
  });

  it('answers wrong key, wrong issuer, missing exp, wrong algorithms and none with the invalid message', () => {
    const tokens = svc();
    const exp = nowSeconds() + 60;
    const cases: Record<string, string> = {
      'wrong key': createTokenService({ signingKey: 'another-key', issuer: 'flint', expirySeconds: 60 }).issue('admin'),
      'wrong issuer': createTokenService({ signingKey: KEY, issuer: 'fission', expirySeconds: 60 }).issue('admin'),
      'no issuer': craftToken({ alg: 'HS256', typ: 'JWT' }, { exp }, KEY),
      'missing exp': craftToken({ alg: 'HS256', typ: 'JWT' }, { iss: 'flint' }, KEY),
      'exp not a number': craftToken({ alg: 'HS256', typ: 'JWT' }, { iss: 'flint', exp: 'later' }, KEY),
      'alg none': craftToken({ alg: 'none', typ: 'JWT' }, { iss: 'flint', exp }, undefined),
      'alg none with a signature': craftToken({ alg: 'none', typ: 'JWT' }, { iss: 'flint', exp }, KEY),
      'HS512 with the key': craftToken({ alg: 'HS512', typ: 'JWT' }, { iss: 'flint', exp }, KEY),
      'not yet valid': craftToken({ alg: 'HS256', typ: 'JWT' }, { iss: 'flint', exp: exp + 600, nbf: exp + 300 }, KEY),
      'tampered payload': (() => {
        const [h, , s] = tokens.issue('admin').split('.');
        const p = Buffer.from(JSON.stringify({ iss: 'flint', sub: 'root', exp })).toString('base64url');
        return `${h}.${p}.${s}`;
      })(),
    };
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rsInput = `${Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify({ iss: 'flint', exp })).toString('base64url')}`;
    cases['RS256 signed with a real RSA key'] = `${rsInput}.${rsaSign('sha256', Buffer.from(rsInput), privateKey).toString('base64url')}`;
    for (const [name, token] of Object.entries(cases)) {
      assert.deepEqual(tokens.verify(token), { ok: false, message: INVALID_TOKEN }, name);
    }
  });

  it('says expired only for a correctly signed token past its exp', async () => {
    const tokens = svc();
    const past = nowSeconds() - 10;
    assert.equal((tokens.verify(craftToken({ alg: 'HS256' }, { iss: 'flint', exp: past }, KEY)) as any).message, EXPIRED_TOKEN);
    assert.equal((tokens.verify(craftToken({ alg: 'HS256' }, { iss: 'flint', exp: past }, 'wrong')) as any).message, INVALID_TOKEN);

    const short = createTokenService({ signingKey: KEY, issuer: 'flint', expirySeconds: 1 });
    const token = short.issue('admin');
    assert.equal(short.verify(token).ok, true);
    await eventually(() => !short.verify(token).ok, 'the token to expire');
    assert.deepEqual(short.verify(token), { ok: false, message: EXPIRED_TOKEN });
  });

  it('serves verified tokens from the cache, but never at or past their exp', async () => {
    const tokens = createTokenService({ signingKey: KEY, issuer: 'flint', expirySeconds: 1 });
    const token = tokens.issue('admin');
    const exp = decode(token).payload.exp * 1000;
    assert.equal(tokens.verify(token).ok, true);
    const before = tokens.cacheStats.hits;
    assert.equal(tokens.verify(token).ok, true);
    assert.equal(tokens.cacheStats.hits, before + 1, 'the second check is a cache hit');
    // Every check at or past exp is kept, not asserted inside the wait: a
    // throw there would only count as "not yet" and be retried.
    const atOrPast: unknown[] = [];
    await eventually(() => {
      const t = Date.now();
      const r = tokens.verify(token);
      if (t >= exp) atOrPast.push(r);
      return atOrPast.length > 0;
    }, 'a check at or past exp', 10_000, 20);
    for (const r of atOrPast) assert.deepEqual(r, { ok: false, message: EXPIRED_TOKEN }, 'checked at or after exp');
  });

  it('does not cache failures', () => {
    const tokens = svc();
    const bad = craftToken({ alg: 'HS256' }, { iss: 'flint', exp: nowSeconds() + 60 }, 'wrong');
    tokens.verify(bad);
    tokens.verify(bad);
    assert.equal(tokens.cacheStats.size, 0);
  });
});

describe('verified-token cache', () => {
  it('is bounded and evicts the least recently used entry', () => {
    const cache = new VerifiedTokenCache<number>(2);
    const far = Date.now() + 60_000;
    cache.set('a', 1, far);
    cache.set('b', 2, far);
    assert.equal(cache.get('a', Date.now()), 1); // a is now the most recent
    cache.set('c', 3, far);
    assert.equal(cache.size, 2);
    assert.equal(cache.get('b', Date.now()), undefined, 'b was least recently used');
    assert.equal(cache.get('a', Date.now()), 1);
    assert.equal(cache.get('c', Date.now()), 3);
  });

  it('drops an entry asked for at or after its end', () => {
    const cache = new VerifiedTokenCache<number>(10);
    cache.set('a', 1, 1000);
    assert.equal(cache.get('a', 999), 1);
    assert.equal(cache.get('a', 1000), undefined);
    assert.equal(cache.size, 0);
  });
});

describe('minted token source', () => {
  it('reuses a token until a third of its life is left, then mints a new one', () => {
    const tokens = svc();
    let clock = 1_000_000;
    const next = createMintedTokenSource({ tokens, subject: 'flint:mqtrigger', ttlSeconds: 60, now: () => clock });
    const first = next();
    assert.match(first, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.ok(tokens.verify(first).ok);
    clock += 30_000;
    assert.equal(next(), first);
    clock += 10_000;
    const renewed = next();
    assert.ok(tokens.verify(renewed).ok);
  });
});
