import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ARCHIVES_AUDIENCE, CONTROL_PLANE_AUDIENCE, ROUTER_AUDIENCE } from './audiences.ts';
import { createRouterGuard } from './guard.ts';
import { basicCredentials, bearerToken } from './http.ts';
import { createLoginHandler } from './login.ts';
import { craftToken, listen, nowSeconds, request, type TestServer } from './testing.ts';
import { TokenScope } from './scope.ts';
import { createTokenService } from './tokens.ts';

const KEY = 'k'.repeat(43);
const tokens = createTokenService({ signingKey: KEY, issuer: 'flint', expirySeconds: 120 });
const credentials = { username: 'admin', password: 'pw-0123456789' };
const MALFORMED = '{"message":"Unauthorized: malformed Token","statusCode":401}';

describe('router guard', () => {
  let server: TestServer;
  const routed: string[] = [];
  before(async () => {
    const guard = createRouterGuard({ tokens, authUriPath: '/auth/login', login: createLoginHandler({ tokens, credentials }) });
    // Stands in for the router: whatever passes the guard is "routed".
    server = await listen((req, res) => {
      if (!guard(req, res)) return;
      routed.push(req.url ?? '');
      res.end('routed');
    });
  });
  after(() => server.close());

  it('lets /router-healthz through without a token', async () => {
    for (const url of ['/router-healthz', '/router-healthz?probe=1']) {
      const r = await request(server.url + url);
      assert.equal(r.status, 200);
      assert.equal(r.text, 'routed');
    }
  });

  it('answers the auth path itself with the login handler', async () => {
    const r = await request(`${server.url}/auth/login`, { method: 'POST', body: JSON.stringify(credentials) });
    assert.equal(r.status, 201);
    assert.equal(r.json.tokentype, 'Bearer');
    const wrong = await request(`${server.url}/auth/login`, { method: 'GET' });
    assert.equal(wrong.status, 405);
    assert.ok(!routed.includes('/auth/login'));
  });

  it('refuses anything else without a well-formed bearer token, with the exact malformed body', async () => {
    const valid = tokens.issue('admin');
    const headers: Array<Record<string, string>> = [
      {},
      { authorization: '' },
      { authorization: 'Bearer' },
      { authorization: 'Bearer ' },
      { authorization: `Basic ${Buffer.from('admin:pw').toString('base64')}` },
      { authorization: valid },
      { authorization: `Token ${valid}` },
      { authorization: 'Bearer not-a-jwt' },
      { authorization: 'Bearer a.b' },
      { authorization: `Bearer ${valid} extra` },
    ];
    for (const h of headers) {
      for (const url of ['/hello', '/flint-function/hello', '/', '/router-healthz/x', '/auth/login/x', '/unknown']) {
        const r = await request(server.url + url, { headers: h });
        assert.equal(r.status, 401, `${url} ${JSON.stringify(h)}`);
        assert.equal(r.text, MALFORMED);
        assert.equal(r.headers.get('content-type'), 'application/json');
        assert.equal(r.headers.get('www-authenticate'), 'Bearer');
      }
    }
    assert.deepEqual(routed.filter((u) => u !== '/router-healthz' && !u.startsWith('/router-healthz?')), []);
  });

  it('answers expired and invalid tokens with their messages', async () => {
    const expired = craftToken({ alg: 'HS256', typ: 'JWT' }, { iss: 'flint', exp: nowSeconds() - 5 }, KEY);
    const r1 = await request(`${server.url}/hello`, { headers: { authorization: `Bearer ${expired}` } });
    assert.equal(r1.status, 401);
    assert.equal(r1.text, '{"message":"Unauthorized: token is expired","statusCode":401}');
    const forged = craftToken({ alg: 'HS256', typ: 'JWT' }, { iss: 'flint', exp: nowSeconds() + 60 }, 'not-the-key');
    const r2 = await request(`${server.url}/hello`, { headers: { authorization: `Bearer ${forged}` } });
    assert.equal(r2.status, 401);
    assert.equal(r2.text, '{"message":"Unauthorized: invalid Token","statusCode":401}');
    assert.equal(r2.headers.get('www-authenticate'), 'Bearer');
  });

  it('passes a request with a valid token on to routing, for user routes and the internal function path', async () => {
    const login = await request(`${server.url}/auth/login`, { method: 'POST', body: JSON.stringify(credentials) });
    const token = login.json.accesstoken as string;
    for (const url of ['/hello?x=1', '/flint-function/hello']) {
      const r = await request(server.url + url, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(r.status, 200);
      assert.equal(r.text, 'routed');
    }
    const minted = tokens.mint('flint:mqtrigger', 30);
    const r = await request(`${server.url}/flint-function/hello`, { method: 'POST', body: 'msg', headers: { authorization: `Bearer ${minted}` } });
    assert.equal(r.status, 200);
    assert.ok(routed.includes('/hello?x=1'));
  });
});

describe('router guard audiences and scopes', () => {
  const guard = createRouterGuard({ tokens, authUriPath: '/auth/login', login: () => {} });
  function run(token: string): { go: ReturnType<typeof guard>; status: number; body: string } {
    let body = '';
    const res = { statusCode: 200, headersSent: false, setHeader: () => {}, end: (b?: Buffer) => (body = b?.toString() ?? ''), destroy: () => {} };
    const req = { method: 'GET', url: '/hello', headers: { authorization: `Bearer ${token}` }, socket: {}, on: () => {} };
    const go = guard(req, res);
    return { go, status: res.statusCode, body };
  }

  it('refuses control-plane, archive and audience-less tokens with a message that says why', () => {
    const cp = run(tokens.issueFor({ audience: CONTROL_PLANE_AUDIENCE, username: 'admin', ttlSeconds: 60 }).token);
    assert.equal(cp.go, false);
    assert.equal(cp.status, 401);
    assert.deepEqual(JSON.parse(cp.body), {
      message: 'Unauthorized: this is a control-plane token (audience flint-control-plane); the router takes router tokens (audience flint-router): flint token create',
      statusCode: 401,
    });
    assert.match(run(tokens.mint('flint:fetcher', 30, ARCHIVES_AUDIENCE)).body, /this is a fetcher's archive token \(audience flint-archives\)/);
    const bare = craftToken({ alg: 'HS256', typ: 'JWT' }, { iss: 'flint', sub: 'admin', exp: nowSeconds() + 60 }, KEY);
    assert.match(run(bare).body, /this token names no audience/);
  });

  it('hands a scoped token\'s scope on to the router, and an unscoped one as true', () => {
    assert.equal(run(tokens.issue('admin')).go, true);
    const scope = new TokenScope(['default/hello'], ['GET']);
    const go = run(tokens.issueFor({ audience: ROUTER_AUDIENCE, username: 'admin', ttlSeconds: 60, scope }).token).go;
    assert.ok(go instanceof TokenScope);
    assert.equal(go.refusal('GET', 'default/hello'), undefined);
    assert.equal(go.refusal('GET', 'default/other'), 'Forbidden: function default/other is not in this token\'s scope');
    assert.equal(go.refusal('POST', 'default/hello'), "Forbidden: method POST is not allowed by this token's scope (it allows GET)");
  });
});

describe('router guard path', () => {
  it("uses the router's parsed path when given one", async () => {
    const guard = createRouterGuard({ tokens, authUriPath: '/auth/login', login: () => {} });
    const req = { url: 'http://example.com/router-healthz', headers: {} } as any;
    assert.equal(guard(req, {} as any, { path: '/router-healthz' }), true);
  });
});

describe('bearerToken', () => {
  it('reads the token of a Bearer header, scheme in any case', () => {
    assert.equal(bearerToken('Bearer abc'), 'abc');
    assert.equal(bearerToken('bearer abc'), 'abc');
    assert.equal(bearerToken('BEARER   abc  '), 'abc');
    assert.equal(bearerToken('Bearer a b'), undefined);
    assert.equal(bearerToken('Bearerabc'), undefined);
    assert.equal(bearerToken(undefined), undefined);
  });
});

describe('basicCredentials', () => {
  it('reads user:password of a Basic header, scheme in any case, and nothing else', () => {
    const b64 = (v: string) => Buffer.from(v).toString('base64');
    assert.deepEqual(basicCredentials(`Basic ${b64('admin:p:w')}`), { username: 'admin', password: 'p:w' });
    assert.deepEqual(basicCredentials(`basic ${b64('admin:')}`), { username: 'admin', password: '' });
    assert.equal(basicCredentials(`Basic ${b64('no-colon')}`), undefined);
    assert.equal(basicCredentials('Basic !!!'), undefined);
    assert.equal(basicCredentials('Bearer abc'), undefined);
    assert.equal(basicCredentials(undefined), undefined);
  });
});
