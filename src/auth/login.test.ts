import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { createLoginHandler, LOGIN_BODY_LIMIT } from './login.ts';
import { createLoginThrottle } from './login-throttle.ts';
import { listen, request, type TestServer } from './testing.ts';
import { createTokenService } from './tokens.ts';

const tokens = createTokenService({ signingKey: 'k'.repeat(43), issuer: 'flint', expirySeconds: 120 });
const credentials = { username: 'admin', password: 'correct-horse-battery-staple' };

function post(server: TestServer, body: unknown, headers: Record<string, string> = {}) {
  return request(`${server.url}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

describe('login handler', () => {
  let server: TestServer;
  let clock = 1_000_000;
  const throttle = createLoginThrottle({ freeFailures: 3, baseDelayMs: 10_000, now: () => clock });
  const warnings: object[] = [];
  before(async () => {
    server = await listen(createLoginHandler({ tokens, credentials, throttle, logger: { warn: (o) => warnings.push(o) } }));
  });
  after(() => server.close());

  it('answers 201 with an access token for the right credentials', async () => {
    const r = await post(server, credentials);
    assert.equal(r.status, 201);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.deepEqual(Object.keys(r.json), ['accesstoken', 'tokentype']);
    assert.equal(r.json.tokentype, 'Bearer');
    const v = tokens.verify(r.json.accesstoken);
    assert.ok(v.ok && v.username === 'admin');
  });

  it('answers 401 JSON for a wrong password or username', async () => {
    for (const body of [{ ...credentials, password: 'nope' }, { ...credentials, username: 'root' }, { username: '', password: '' }]) {
      const r = await post(server, body);
      assert.equal(r.status, 401);
      assert.equal(r.text, '{"message":"Unauthorized: invalid username or password","statusCode":401}');
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
      await post(server, credentials); // resets the slow-down between cases
    }
    assert.ok(warnings.length >= 3, 'failed logins are logged');
    assert.ok(!JSON.stringify(warnings).includes('nope'), 'passwords are not logged');
  });

  it('answers 400 for bad JSON and missing or mistyped fields', async () => {
    for (const body of ['', '{', 'null', '[]', '"x"', { username: 'admin' }, { password: 'x' }, { username: 1, password: 'x' }]) {
      const r = await post(server, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.json.statusCode, 400);
      assert.equal(typeof r.json.message, 'string');
    }
  });

  it('answers 405 with Allow: POST to other methods', async () => {
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const r = await request(`${server.url}/auth/login`, { method });
      assert.equal(r.status, 405);
      assert.equal(r.headers.get('allow'), 'POST');
      assert.equal(r.json.statusCode, 405);
    }
  });

  it('refuses a body over the cap with 413', async () => {
    const r = await post(server, { username: 'admin', password: 'x'.repeat(LOGIN_BODY_LIMIT) });
    assert.equal(r.status, 413);
    // Sent in chunks without a declared length.
    const { port } = new URL(server.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/auth/login', method: 'POST' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      for (let i = 0; i < 10; i++) req.write('x'.repeat(1024));
      req.end();
    });
    assert.equal(status, 413);
  });

  it('slows down repeated failures from one address with Retry-After and 429', async () => {
    await post(server, credentials);
    const wrong = { ...credentials, password: 'guess' };
    for (let i = 0; i < 3; i++) {
      const r = await post(server, wrong);
      assert.equal(r.status, 401);
      assert.equal(r.headers.get('retry-after'), null, `failure ${i + 1} is free`);
    }
    const fourth = await post(server, wrong);
    assert.equal(fourth.status, 401);
    assert.equal(fourth.headers.get('retry-after'), '10');
    assert.equal(throttle.failures('127.0.0.1'), 4);
    // While locked even the right password is not looked at.
    const locked = await post(server, credentials);
    assert.equal(locked.status, 429);
    assert.equal(locked.headers.get('retry-after'), '10');
    assert.equal(locked.json.statusCode, 429);
    clock += 10_000;
    const fifth = await post(server, wrong);
    assert.equal(fifth.headers.get('retry-after'), '20', 'the delay doubles');
    clock += 20_000;
    const ok = await post(server, credentials);
    assert.equal(ok.status, 201);
    assert.equal(throttle.failures('127.0.0.1'), 0, 'a success clears the count');
  });
});

describe('login handler client address', () => {
  it('uses the address function when given one', async () => {
    const throttle = createLoginThrottle({ freeFailures: 0 });
    const server = await listen(
      createLoginHandler({ tokens, credentials, throttle, clientAddress: (req) => String(req.headers['x-test-client']) }),
    );
    try {
      const r = await post(server, { ...credentials, password: 'x' }, { 'x-test-client': '192.0.2.7' });
      assert.equal(r.headers.get('retry-after'), '1');
      assert.equal(throttle.failures('192.0.2.7'), 1);
      assert.equal(throttle.failures('127.0.0.1'), 0);
      const other = await post(server, credentials, { 'x-test-client': '192.0.2.8' });
      assert.equal(other.status, 201);
    } finally {
      await server.close();
    }
  });
});

