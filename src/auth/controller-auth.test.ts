import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { dataLayout } from '../config/layout.ts';
import { adminTokenFile, ensureAdminToken } from './admin-token.ts';
import { createControllerAuthCheck, FETCHER_SUBJECT, isControllerExempt } from './controller-auth.ts';
import { tempDir } from './testing.ts';
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
  const check = createControllerAuthCheck({ adminToken, tokens });

  it('accepts the admin token and router login tokens', () => {
    assert.equal(check(`Bearer ${adminToken}`), true);
    assert.equal(check(`Bearer ${tokens.issue('admin')}`), true);
  });

  it('refuses no header, other schemes, wrong tokens and minted tokens', () => {
    assert.equal(check(undefined), false);
    assert.equal(check(''), false);
    assert.equal(check(adminToken), false);
    assert.equal(check(`Basic ${adminToken}`), false);
    assert.equal(check(`Bearer ${'A'.repeat(42)}`), false);
    assert.equal(check(`Bearer ${adminToken}A`), false);
    const other = createTokenService({ signingKey: 'x'.repeat(43), issuer: 'flint', expirySeconds: 120 });
    assert.equal(check(`Bearer ${other.issue('admin')}`), false);
    assert.equal(check(`Bearer ${tokens.mint('flint:mqtrigger', 30)}`), false, 'component tokens only call functions');
  });

  it("lets the fetcher's token read archives and nothing else", () => {
    const fetcher = `Bearer ${tokens.mint(FETCHER_SUBJECT, 30)}`;
    const sha = 'a'.repeat(64);
    assert.equal(check(fetcher, { method: 'GET', url: `/v1/archives/${sha}` }), true);
    assert.equal(check(fetcher, { method: 'HEAD', url: `/v1/archives/${sha}?x=1` }), true);
    assert.equal(check(fetcher), false, 'no request, no scope');
    for (const [method, url] of [
      ['POST', '/v1/archives'],
      ['DELETE', `/v1/archives/${sha}`],
      ['GET', '/v1/archives/../namespaces/default/secrets'],
      ['GET', `/v1/archives/${sha}/x`],
      ['GET', '/v1/namespaces/flint/secrets/router'],
    ]) {
      assert.equal(check(fetcher, { method, url }), false, `${method} ${url}`);
    }
    assert.equal(check(`Bearer ${tokens.mint('flint:mqtrigger', 30)}`, { method: 'GET', url: `/v1/archives/${sha}` }), false, 'only the fetcher\'s subject');
  });

  it('accepts only the admin token when given no token service', () => {
    const adminOnly = createControllerAuthCheck({ adminToken });
    assert.equal(adminOnly(`Bearer ${adminToken}`), true);
    assert.equal(adminOnly(`Bearer ${tokens.issue('admin')}`), false);
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
