import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { dataLayout } from '../config/layout.ts';
import { adminTokenFile, ensureAdminToken } from './admin-token.ts';
import { type ControllerRequest, createControllerAuthCheck, FETCHER_SUBJECT, isControllerExempt } from './controller-auth.ts';
import { ARCHIVES_AUDIENCE, CONTROL_PLANE_AUDIENCE, ROUTER_AUDIENCE } from './audiences.ts';
import { TokenScope } from './scope.ts';
import { craftToken, nowSeconds, tempDir } from './testing.ts';
import { createTokenService } from './tokens.ts';

describe('admin token', () => {
  it('is generated once as a 0600 file and kept across calls', () => {
    const t = tempDir();
    try {
      const layout = dataLayout(t.dir);
      const token = ensureAdminToken(layout);
      assert.match(token, /^[A-Za-z0-9_-]{43}$/);
      const file = adminTokenFile(layout);
      assert.equal(file, path.join(layout.private, 'admin-token'));
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.equal(fs.statSync(layout.private).mode & 0o777, 0o700);
      assert.equal(ensureAdminToken(layout), token);
      fs.chmodSync(file, 0o644);
      assert.equal(ensureAdminToken(layout), token);
      assert.equal(fs.statSync(file).mode & 0o777, 0o600, 'a loosened mode is tightened');
    } finally {
      t.cleanup();
    }
  });

  it('replaces a file that does not hold a token, and refuses to follow a symlink', () => {
    const t = tempDir();
    try {
      const layout = dataLayout(t.dir);
      fs.mkdirSync(layout.private, { recursive: true, mode: 0o700 });
      fs.writeFileSync(adminTokenFile(layout), 'short\n');
      const token = ensureAdminToken(layout);
      assert.notEqual(token, 'short');
      assert.equal(fs.readFileSync(adminTokenFile(layout), 'utf8'), `${token}\n`);

      const elsewhere = path.join(t.dir, 'elsewhere');
      fs.writeFileSync(elsewhere, 'x'.repeat(43));
      fs.rmSync(adminTokenFile(layout));
      fs.symlinkSync(elsewhere, adminTokenFile(layout));
      assert.throws(() => ensureAdminToken(layout), { code: 'FLINT_ERR_CONFIG' });
    } finally {
      t.cleanup();
    }
  });
});

describe('controller auth check', () => {
  const tokens = createTokenService({ signingKey: 'k'.repeat(43), issuer: 'flint', expirySeconds: 120 });
  const adminToken = 'A'.repeat(43);
  const credentials = { username: 'admin', password: 'p'.repeat(43) };
  const check = createControllerAuthCheck({ adminToken, tokens, credentials });
  const req = { method: 'GET', url: '/v1/namespaces/default/functions', remoteAddress: '10.0.0.1' };
  const allowed = (authorization: string | undefined, r: ControllerRequest = req) => check(authorization, r) === undefined;
  const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;
  const controlPlane = () => tokens.issueFor({ audience: CONTROL_PLANE_AUDIENCE, username: 'admin', ttlSeconds: 60 }).token;

  it('accepts the admin token and control-plane tokens', () => {
    assert.equal(allowed(`Bearer ${adminToken}`), true);
    assert.equal(allowed(`Bearer ${controlPlane()}`), true);
  });

  it('refuses router tokens (login, issued, scoped, minted) with a message that says why', () => {
    for (const token of [
      tokens.issue('admin'),
      tokens.issueFor({ audience: ROUTER_AUDIENCE, username: 'admin', ttlSeconds: 60 }).token,
      tokens.issueFor({ audience: ROUTER_AUDIENCE, username: 'admin', ttlSeconds: 60, scope: new TokenScope(['default/hello'], ['GET']) }).token,
      tokens.mint('flint:mqtrigger', 30),
    ]) {
      const r = check(`Bearer ${token}`, req);
      assert.equal(r?.status, 401);
      assert.match(r?.message ?? '', /this is a router token \(audience flint-router\); the control plane takes the admin token or a control-plane token: flint token create --audience control-plane/);
    }
  });

  it('refuses no header, other schemes, wrong tokens and tokens without an audience', () => {
    for (const h of [undefined, '', adminToken, `Basic ${adminToken}`, `Bearer ${'A'.repeat(42)}`, `Bearer ${adminToken}A`]) assert.equal(allowed(h), false, String(h));
    const other = createTokenService({ signingKey: 'x'.repeat(43), issuer: 'flint', expirySeconds: 120 });
    assert.equal(allowed(`Bearer ${other.issueFor({ audience: CONTROL_PLANE_AUDIENCE, username: 'admin', ttlSeconds: 60 }).token}`), false);
    const now = nowSeconds();
    const noAudience = craftToken({ alg: 'HS256', typ: 'JWT' }, { iss: 'flint', sub: 'admin', username: 'admin', exp: now + 60 }, 'k'.repeat(43));
    assert.match(check(`Bearer ${noAudience}`, req)?.message ?? '', /names no audience/);
  });

  it('takes the administrator\'s Basic credentials on POST /v1/tokens only, slowing down guessers', () => {
    const tokensReq = { method: 'POST', url: '/v1/tokens', remoteAddress: '10.0.0.2' };
    assert.equal(allowed(basic('admin', credentials.password), tokensReq), true);
    assert.equal(allowed(basic('admin', credentials.password), req), false, 'not on other paths');
    assert.equal(allowed(basic('admin', credentials.password), { ...tokensReq, method: 'GET' }), false);
    assert.equal(check(basic('admin', 'wrong'), tokensReq)?.message, 'Unauthorized: invalid username or password');
    let last: ReturnType<typeof check>;
    for (let i = 0; i < 10; i++) last = check(basic('admin', 'wrong'), tokensReq);
    assert.equal(last?.status, 429);
    assert.ok((last?.retryAfter ?? 0) > 0);
    assert.equal(check(basic('admin', credentials.password), tokensReq)?.status, 429, 'locked: the password is not even looked at');
  });

  it("lets the fetcher's archive token read archives and nothing else", () => {
    const fetcher = `Bearer ${tokens.mint(FETCHER_SUBJECT, 30, ARCHIVES_AUDIENCE)}`;
    const sha = 'a'.repeat(64);
    assert.equal(allowed(fetcher, { method: 'GET', url: `/v1/archives/${sha}` }), true);
    assert.equal(allowed(fetcher, { method: 'HEAD', url: `/v1/archives/${sha}?x=1` }), true);
    for (const [method, url] of [
      ['POST', '/v1/archives'],
      ['DELETE', `/v1/archives/${sha}`],
      ['GET', '/v1/archives/../namespaces/default/secrets'],
      ['GET', `/v1/archives/${sha}/x`],
      ['GET', '/v1/namespaces/flint/secrets/router'],
      ['POST', '/v1/tokens'],
    ]) {
      assert.equal(allowed(fetcher, { method, url }), false, `${method} ${url}`);
    }
    assert.equal(allowed(`Bearer ${tokens.mint(FETCHER_SUBJECT, 30)}`, { method: 'GET', url: `/v1/archives/${sha}` }), false, 'the subject alone is not enough: a router token');
  });

  it('accepts only the admin token when given no token service', () => {
    const adminOnly = createControllerAuthCheck({ adminToken });
    assert.equal(adminOnly(`Bearer ${adminToken}`, req), undefined);
    assert.equal(adminOnly(`Bearer ${controlPlane()}`, req)?.status, 401);
    assert.throws(() => createControllerAuthCheck({ adminToken: 'short' }));
  });

  it('exempts exactly /healthz and /v1/info', () => {
    assert.equal(isControllerExempt('/healthz'), true);
    assert.equal(isControllerExempt('/v1/info?x=1'), true);
    for (const url of ['/v1/info/x', '/healthz/', '/v1/namespaces/default/functions', '/openapi.json', '/', undefined]) {
      assert.equal(isControllerExempt(url), false, String(url));
    }
  });
});
