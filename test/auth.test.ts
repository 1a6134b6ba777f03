// Router token authentication end to end, as the product document shows it:
// install with authentication on, read the credentials, create a token, call
// a route with and without it.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;
let password: string;

function ok(args: string[], env?: NodeJS.ProcessEnv): string {
  const r = flint(server, args, { cwd: work, env });
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function b64url(v: unknown): string {
  return Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
}

function forge(key: string, claims: Record<string, unknown>, alg = 'HS256'): string {
  const head = `${b64url({ alg, typ: 'JWT' })}.${b64url(claims)}`;
  return `${head}.${createHmac('sha256', key).update(head).digest('base64url')}`;
}

async function call(token?: string, url = '/hello') {
  const res = await fetch(server.routerUrl + url, { headers: token === undefined ? {} : { authorization: token } });
  return { status: res.status, text: await res.text() };
}

const MALFORMED = '{"message":"Unauthorized: malformed Token","statusCode":401}';

describe('router token authentication', { timeout: 180_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-auth-'));
    server = await startServer({ sets: ['authentication.enabled=true', 'authentication.jwtExpiryTime=2'] });
    fs.writeFileSync(path.join(work, 'hello.js'), 'module.exports = async () => ({ status: 200, body: "hello, world\\n" });');
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js']);
    ok(['route', 'create', '--name', 'hello', '--url', '/hello', '--function', 'hello']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('creates the router secret and lets the administrator read it', () => {
    password = ok(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'password']).trim();
    assert.ok(password.length >= 20, 'a strong random password');
    assert.equal(ok(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'username']).trim(), 'admin');
    const creds = path.join(server.dataDir, 'private', 'router-credentials.json');
    assert.equal(fs.statSync(creds).mode & 0o777, 0o600);
    assert.equal(JSON.parse(fs.readFileSync(creds, 'utf8')).password, password);
  });

  it('refuses the control plane without credentials', () => {
    const r = flint(server, ['env', 'list'], { cwd: work, env: { FLINT_DATA_DIR: path.join(work, 'nowhere') } });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /^Error: the control plane requires authentication/m);
  });

  it('issues a token and lets only callers with a valid one through', async () => {
    const token = ok(['token', 'create', '--username', 'admin', '--password', password]).trim();
    assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/, 'token create prints only the token');
    assert.deepEqual(await call(`Bearer ${token}`), { status: 200, text: 'hello, world\n' });
    assert.deepEqual(await call(), { status: 401, text: MALFORMED });
    assert.deepEqual(await call('Bearer not-a-token'), { status: 401, text: MALFORMED });
    assert.deepEqual(await call('Basic abc'), { status: 401, text: MALFORMED });
    assert.deepEqual(await call(undefined, '/flint-function/hello'), { status: 401, text: MALFORMED });
    assert.equal((await call(undefined, '/router-healthz')).status, 200);
    assert.deepEqual(await call(undefined, '/metrics'), { status: 401, text: MALFORMED }, 'metrics name every function: they need the token');
    assert.equal((await call(`Bearer ${token}`, '/metrics')).status, 200);
    const key = ok(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'jwtSigninKey']).trim();
    const now = Math.floor(Date.now() / 1000);
    const other = await call(`Bearer ${forge('some-other-key', { iss: 'flint', nbf: now - 1, exp: now + 60 })}`);
    assert.deepEqual(JSON.parse(other.text), { message: 'Unauthorized: invalid Token', statusCode: 401 });
    const issuer = await call(`Bearer ${forge(key, { iss: 'someone-else', nbf: now - 1, exp: now + 60 })}`);
    assert.deepEqual(JSON.parse(issuer.text), { message: 'Unauthorized: invalid Token', statusCode: 401 });
    const none = await call(`Bearer ${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ iss: 'flint', exp: now + 60 })}.`);
    assert.equal(none.status, 401);
    assert.equal((await call(`Bearer ${forge(key, { iss: 'flint', aud: 'flint-router', nbf: now - 1, exp: now + 60 })}`)).status, 200, 'a router token signed with the key passes');
    const noAudience = await call(`Bearer ${forge(key, { iss: 'flint', nbf: now - 1, exp: now + 60 })}`);
    assert.equal(noAudience.status, 401, 'every token names its audience');
    assert.match(JSON.parse(noAudience.text).message, /this token names no audience/);
    await eventually(async () => (await call(`Bearer ${token}`)).status === 401, 'the 2 s token to expire');
    assert.deepEqual(JSON.parse((await call(`Bearer ${token}`)).text), { message: 'Unauthorized: token is expired', statusCode: 401 });
  });

  it('answers the login endpoint as documented', async () => {
    const login = (body: string, method = 'POST') => fetch(`${server.routerUrl}/auth/login`, { method, headers: { 'content-type': 'application/json' }, body: method === 'GET' ? undefined : body });
    const good = await login(JSON.stringify({ username: 'admin', password }));
    assert.equal(good.status, 201);
    const j = (await good.json()) as { accesstoken: string; tokentype: string };
    assert.equal(j.tokentype, 'Bearer');
    const bad = await login(JSON.stringify({ username: 'admin', password: 'wrong' }));
    assert.equal(bad.status, 401);
    assert.deepEqual(await bad.json(), { message: 'Unauthorized: invalid username or password', statusCode: 401 });
    assert.equal((await login('{nope')).status, 400);
    assert.equal((await login('', 'GET')).status, 405);
    const wrong = flint(server, ['token', 'create', '--username', 'admin', '--password', 'wrong'], { cwd: work });
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /^Error: .*invalid username or password/m);
  });

  it('fn test takes credentials from FLINT_AUTH_TOKEN, FLINT_USERNAME/FLINT_PASSWORD or an explicit header', () => {
    const none = flint(server, ['fn', 'test', '--name', 'hello'], { cwd: work });
    assert.notEqual(none.code, 0);
    assert.equal(none.stderr.trim(), `Error: Error calling function hello: 401; Please try again or fix the error: ${MALFORMED}`);
    assert.equal(ok(['fn', 'test', '--name', 'hello'], { FLINT_USERNAME: 'admin', FLINT_PASSWORD: password }), 'hello, world\n');
    // This server's tokens live 2 s; one signed with its key lives long enough for the checks.
    const key = ok(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'jwtSigninKey']).trim();
    const now = Math.floor(Date.now() / 1000);
    const token = forge(key, { iss: 'flint', aud: 'flint-router', sub: 'admin', nbf: now - 1, exp: now + 600 });
    assert.equal(ok(['fn', 'test', '--name', 'hello'], { FLINT_AUTH_TOKEN: token }), 'hello, world\n');
    assert.equal(ok(['fn', 'test', '--name', 'hello', '--header', `Authorization: Bearer ${token}`]), 'hello, world\n');
    const explicitWins = flint(server, ['fn', 'test', '--name', 'hello', '--header', 'Authorization: Bearer junk'], { cwd: work, env: { FLINT_AUTH_TOKEN: token } });
    assert.notEqual(explicitWins.code, 0, 'an explicit header wins over FLINT_AUTH_TOKEN');
  });

  it('has no login endpoint when authentication is off', async () => {
    const plain = await startServer();
    try {
      const res = await fetch(`${plain.routerUrl}/auth/login`, { method: 'POST', body: '{}' });
      assert.equal(res.status, 404);
      const r = flint(plain, ['token', 'create', '--username', 'admin', '--password', 'x']);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /authentication may be off/);
    } finally {
      await plain.stop();
    }
  });
});
