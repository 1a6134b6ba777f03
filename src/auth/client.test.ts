import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dataLayout } from '../config/layout.ts';
import { ensureAdminToken } from './admin-token.ts';
import { CONTROL_PLANE_AUDIENCE, ROUTER_AUDIENCE } from './audiences.ts';
import { claimedAudience, controllerUnauthorizedHint, fetchToken, loginUrl, resolveControllerToken, resolveInvokeAuthorization } from './client.ts';
import { createRouterGuard } from './guard.ts';
import { createLoginHandler } from './login.ts';
import { createLoginThrottle } from './login-throttle.ts';
import { listen, type TestServer, tempDir } from './testing.ts';
import { createTokenService } from './tokens.ts';

const tokens = createTokenService({ signingKey: 'k'.repeat(43), issuer: 'flint', expirySeconds: 120 });
const credentials = { username: 'admin', password: 'pw-0123456789' };

describe('fetchToken', () => {
  let router: TestServer;
  before(async () => {
    const guard = createRouterGuard({
      tokens,
      authUriPath: '/auth/login',
      login: createLoginHandler({ tokens, credentials, throttle: createLoginThrottle({ freeFailures: 1, baseDelayMs: 30_000 }) }),
    });
    router = await listen((req, res) => {
      if (guard(req, res)) res.end('ok');
    });
  });
  after(() => router.close());

  it('returns the access token for the right credentials', async () => {
    const token = await fetchToken({ routerUrl: `${router.url}/`, authUriPath: 'auth/login', ...credentials });
    assert.ok(tokens.verify(token).ok);
  });

  it('says invalid username or password on 401, and when to retry on 429', async () => {
    await assert.rejects(fetchToken({ routerUrl: router.url, ...credentials, password: 'no' }), {
      code: 'FLINT_ERR_UNAUTHORIZED',
      message: 'invalid username or password',
    });
    await assert.rejects(fetchToken({ routerUrl: router.url, ...credentials, password: 'no' }), { code: 'FLINT_ERR_UNAUTHORIZED' });
    await assert.rejects(fetchToken({ routerUrl: router.url, ...credentials }), {
      code: 'FLINT_ERR_TOO_MANY_REQUESTS',
      message: /try again in 30 s/,
    });
  });

  it('explains a 404: no login endpoint there', async () => {
    const plain = await listen((_req, res) => {
      res.statusCode = 404;
      res.end('{"message":"no route"}');
    });
    try {
      await assert.rejects(fetchToken({ routerUrl: plain.url, ...credentials }), {
        code: 'FLINT_ERR_NOT_FOUND',
        message: `the router has no login endpoint at ${plain.url}/auth/login: authentication may be off or the auth URI wrong (set --authuri or FLINT_AUTH_URI)`,
      });
    } finally {
      await plain.close();
    }
  });

  it('says the router is unreachable when nothing listens', async () => {
    const gone = await listen(() => {});
    await gone.close();
    await assert.rejects(fetchToken({ routerUrl: gone.url, ...credentials }), (err: any) => {
      assert.equal(err.code, 'FLINT_ERR_UNREACHABLE');
      assert.match(err.message, /^cannot reach the router at http:\/\/127\.0\.0\.1:\d+\/auth\/login \(ECONNREFUSED\)/);
      return true;
    });
  });

  it('joins router URL and auth path', () => {
    assert.equal(loginUrl('http://h:1/', '/auth/login'), 'http://h:1/auth/login');
    assert.equal(loginUrl('http://h:1'), 'http://h:1/auth/login');
  });
});

describe('resolveInvokeAuthorization', () => {
  const opts = (calls: unknown[]) => ({
    routerUrl: 'http://router',
    login: async (o: unknown) => {
      calls.push(o);
      return 'fetched.jwt.token';
    },
  });

  it('lets an explicit Authorization header win', async () => {
    const calls: unknown[] = [];
    const env = { FLINT_AUTH_TOKEN: 't', FLINT_USERNAME: 'u', FLINT_PASSWORD: 'p' };
    assert.deepEqual(await resolveInvokeAuthorization(env, ['X-A: 1', 'authorization: Bearer mine'], opts(calls)), {
      authorization: undefined,
      source: 'header',
    });
    assert.deepEqual(await resolveInvokeAuthorization(env, { Authorization: 'Bearer map' }, opts(calls)), {
      authorization: undefined,
      source: 'header',
    });
    assert.equal(calls.length, 0);
  });

  it('uses FLINT_AUTH_TOKEN next', async () => {
    const calls: unknown[] = [];
    const r = await resolveInvokeAuthorization({ FLINT_AUTH_TOKEN: 'abc', FLINT_USERNAME: 'u', FLINT_PASSWORD: 'p' }, ['X-A: 1'], opts(calls));
    assert.deepEqual(r, { authorization: 'Bearer abc', source: 'FLINT_AUTH_TOKEN' });
    assert.equal(calls.length, 0);
  });

  it('logs in with FLINT_USERNAME and FLINT_PASSWORD next, honouring FLINT_AUTH_URI', async () => {
    const calls: any[] = [];
    const r = await resolveInvokeAuthorization({ FLINT_USERNAME: 'u', FLINT_PASSWORD: 'p', FLINT_AUTH_TOKEN: '' }, [], {
      ...opts(calls),
      authUriPath: '/from-info',
    });
    assert.deepEqual(r, { authorization: 'Bearer fetched.jwt.token', source: 'login' });
    assert.deepEqual(calls, [{ routerUrl: 'http://router', authUriPath: '/from-info', username: 'u', password: 'p' }]);
    await resolveInvokeAuthorization({ FLINT_USERNAME: 'u', FLINT_PASSWORD: 'p', FLINT_AUTH_URI: '/custom' }, [], opts(calls));
    assert.equal(calls[1].authUriPath, '/custom');
    let asked = 0;
    const lazy = async () => {
      asked++;
      return '/lazy';
    };
    await resolveInvokeAuthorization({ FLINT_AUTH_TOKEN: 't' }, [], { ...opts(calls), authUriPath: lazy });
    assert.equal(asked, 0, 'the server is not asked unless a login happens');
    await resolveInvokeAuthorization({ FLINT_USERNAME: 'u', FLINT_PASSWORD: 'p' }, [], { ...opts(calls), authUriPath: lazy });
    assert.equal(calls[2].authUriPath, '/lazy');
  });

  it('sends nothing otherwise', async () => {
    const calls: unknown[] = [];
    assert.deepEqual(await resolveInvokeAuthorization({}, [], opts(calls)), { authorization: undefined, source: 'none' });
    assert.deepEqual(await resolveInvokeAuthorization({ FLINT_USERNAME: 'u' }, [], opts(calls)), { authorization: undefined, source: 'none' });
    assert.equal(calls.length, 0);
  });

  it('works end to end against a real login endpoint', async () => {
    const server = await listen(createLoginHandler({ tokens, credentials }));
    try {
      const r = await resolveInvokeAuthorization({ FLINT_USERNAME: 'admin', FLINT_PASSWORD: credentials.password }, [], { routerUrl: server.url });
      assert.equal(r.source, 'login');
      assert.ok(tokens.verify(r.authorization?.slice(7)).ok);
    } finally {
      await server.close();
    }
  });
});

describe('resolveControllerToken', () => {
  const jwt = (aud: string) => `${Buffer.from('{"alg":"HS256"}').toString('base64url')}.${Buffer.from(JSON.stringify({ aud })).toString('base64url')}.sig`;
  const cpToken = jwt(CONTROL_PLANE_AUDIENCE);
  const routerToken = jwt(ROUTER_AUDIENCE);

  it('prefers FLINT_ADMIN_TOKEN, then the admin-token file, then a control-plane FLINT_AUTH_TOKEN, then FLINT_USERNAME/FLINT_PASSWORD', () => {
    const t = tempDir();
    try {
      const dataDir = path.join(t.dir, 'data');
      const login = { FLINT_USERNAME: 'admin', FLINT_PASSWORD: 'pw' };
      assert.equal(resolveControllerToken({ FLINT_DATA_DIR: dataDir }), undefined);
      assert.equal(resolveControllerToken({ FLINT_DATA_DIR: dataDir, FLINT_AUTH_TOKEN: routerToken }), undefined, 'a router token is not sent to the control plane');
      assert.deepEqual(resolveControllerToken({ FLINT_DATA_DIR: dataDir, FLINT_AUTH_TOKEN: cpToken }), { token: cpToken, source: 'FLINT_AUTH_TOKEN' });
      assert.deepEqual(resolveControllerToken({ FLINT_DATA_DIR: dataDir, FLINT_AUTH_TOKEN: routerToken, ...login }), {
        login: { username: 'admin', password: 'pw' },
        source: 'FLINT_USERNAME and FLINT_PASSWORD',
      });
      const admin = ensureAdminToken(dataLayout(dataDir));
      const fromFile = resolveControllerToken({ FLINT_DATA_DIR: dataDir, FLINT_AUTH_TOKEN: cpToken, ...login });
      assert.equal(fromFile?.token, admin);
      assert.equal(fromFile?.source, 'admin-token file');
      assert.deepEqual(resolveControllerToken({ FLINT_DATA_DIR: dataDir, FLINT_ADMIN_TOKEN: 'env-admin' }), {
        token: 'env-admin',
        source: 'FLINT_ADMIN_TOKEN',
      });
      // An unreadable file is skipped, not fatal (root reads everything, so only check as another user).
      if (process.getuid?.() !== 0) {
        fs.chmodSync(path.join(dataDir, 'private'), 0o000);
        try {
          assert.deepEqual(resolveControllerToken({ FLINT_DATA_DIR: dataDir, FLINT_AUTH_TOKEN: cpToken }), { token: cpToken, source: 'FLINT_AUTH_TOKEN' });
        } finally {
          fs.chmodSync(path.join(dataDir, 'private'), 0o700);
        }
      }
    } finally {
      t.cleanup();
    }
  });

  it('reads the audience a token claims, and nothing from what is not a JWT', () => {
    assert.equal(claimedAudience(cpToken), CONTROL_PLANE_AUDIENCE);
    assert.equal(claimedAudience('not.a.jwt'), undefined);
    assert.equal(claimedAudience('opaque'), undefined);
  });

  it('defaults the data directory to .flint-data in the working directory', () => {
    const t = tempDir();
    const cwd = process.cwd();
    try {
      process.chdir(t.dir);
      const admin = ensureAdminToken(dataLayout('.flint-data'));
      assert.equal(resolveControllerToken({})?.token, admin);
    } finally {
      process.chdir(cwd);
      t.cleanup();
    }
  });

  it('has a hint for a refused token, and says when FLINT_AUTH_TOKEN was a router token', () => {
    assert.match(controllerUnauthorizedHint(undefined), /no token was sent/);
    assert.match(controllerUnauthorizedHint({ token: 'x', source: 'FLINT_AUTH_TOKEN' }), /credentials from FLINT_AUTH_TOKEN were refused/);
    assert.match(controllerUnauthorizedHint(undefined, { FLINT_AUTH_TOKEN: routerToken }), /FLINT_AUTH_TOKEN holds a router token, which the control plane does not take/);
  });
});
