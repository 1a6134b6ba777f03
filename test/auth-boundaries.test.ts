// The boundaries between tokens, attacked through the real CLI and HTTP
// against a running server: router tokens never open the control plane,
// control-plane tokens never call functions, a function never sees the
// caller's token unless the install says so, and a scoped router token
// reaches only its functions and methods, until it expires.
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
let adminToken: string;
/** Env for a CLI that does not find the server's data directory: only what it is given. */
let elsewhere: NodeJS.ProcessEnv;

function run(args: string[], env?: NodeJS.ProcessEnv, on: TestServer = server) {
  return flint(on, args, { cwd: work, env });
}

function ok(args: string[], env?: NodeJS.ProcessEnv, on: TestServer = server): string {
  const r = run(args, env, on);
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function refused(args: string[], pattern: RegExp, env?: NodeJS.ProcessEnv): void {
  const r = run(args, env);
  assert.notEqual(r.code, 0, `flint ${args.join(' ')} should fail:\n${r.stdout}`);
  assert.match(r.stderr, pattern);
}

async function call(urlPath: string, token: string | undefined, method = 'GET', base = server.routerUrl) {
  const res = await fetch(base + urlPath, { method, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

function payloadOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'));
}

function forge(key: string, claims: Record<string, unknown>): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const head = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${head}.${createHmac('sha256', key).update(head).digest('base64url')}`;
}

const ECHO = 'module.exports = async (context) => ({ status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(context.request.headers) });\n';

/** Every route of the control plane: the OpenAPI document's, plus the two it hides. */
async function controlPlaneRoutes(): Promise<Array<[string, string]>> {
  const res = await fetch(`${server.controllerUrl}/openapi.json`, { headers: { authorization: `Bearer ${adminToken}` } });
  assert.equal(res.status, 200);
  const doc = (await res.json()) as { paths: Record<string, Record<string, unknown>> };
  const routes: Array<[string, string]> = [
    ['GET', '/openapi.json'],
    ['GET', '/metrics'],
  ];
  for (const [p, ops] of Object.entries(doc.paths)) {
    const concrete = p.replace(/\{([^}]+)\}/g, (_, name: string) => (name === 'sha256' ? 'a'.repeat(64) : name === 'namespace' ? 'flint' : 'router'));
    for (const m of Object.keys(ops)) routes.push([m.toUpperCase(), concrete]);
  }
  return routes;
}

describe('token boundaries', { timeout: 240_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-authb-'));
    server = await startServer({ sets: ['authentication.enabled=true'] });
    elsewhere = { FLINT_DATA_DIR: path.join(work, 'not-the-data-dir') };
    adminToken = fs.readFileSync(path.join(server.dataDir, 'private', 'admin-token'), 'utf8').trim();
    password = ok(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'password']).trim();
    fs.writeFileSync(path.join(work, 'hello.js'), 'module.exports = async () => ({ status: 200, body: "hello\\n" });\n');
    fs.writeFileSync(path.join(work, 'echo.js'), ECHO);
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1', '--namespace', 'other']);
    ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js']);
    ok(['fn', 'create', '--name', 'echo', '--env', 'nodejs', '--code', 'echo.js']);
    ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js', '--namespace', 'other']);
    ok(['route', 'create', '--name', 'hello', '--url', '/hello', '--function', 'hello']);
    ok(['route', 'create', '--name', 'hello-post', '--url', '/hello-post', '--method', 'POST', '--function', 'hello']);
    ok(['route', 'create', '--name', 'echo', '--url', '/echo', '--function', 'echo']);
    ok(['route', 'create', '--name', 'canary', '--url', '/canary', '--function', 'hello', '--weight', '50', '--function', 'echo', '--weight', '50']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('refuses router tokens on every control-plane route, saying why', async () => {
    const routes = await controlPlaneRoutes();
    assert.ok(routes.length > 40, `the OpenAPI document lists the API (${routes.length} routes)`);
    const login = ok(['token', 'create', '--username', 'admin', '--password', password]).trim();
    const issued = ok(['token', 'create', '--ttl', '10m']).trim();
    const scoped = ok(['token', 'create', '--function', 'hello']).trim();
    for (const token of [login, issued, scoped]) assert.equal(payloadOf(token).aud, 'flint-router');
    for (const [method, p] of routes) {
      if (p === '/healthz' || p === '/v1/info') continue;
      for (const token of [login, issued, scoped]) {
        const r = await call(p, token, method, server.controllerUrl);
        assert.equal(r.status, 401, `${method} ${p}: ${r.text}`);
        assert.equal(
          r.json.message,
          'Unauthorized: this is a router token (audience flint-router); the control plane takes the admin token or a control-plane token: flint token create --audience control-plane',
        );
      }
    }
    // The router secret stays unread with a router token, whichever way the CLI is pointed.
    refused(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'jwtSigninKey'], /FLINT_AUTH_TOKEN holds a router token/, { ...elsewhere, FLINT_AUTH_TOKEN: login });
    refused(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'jwtSigninKey'], /this is a router token/, { ...elsewhere, FLINT_ADMIN_TOKEN: login });
  });

  it("lets the fetcher's archive token read archives and refuses it everywhere else, the router included", async () => {
    const key = ok(['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'jwtSigninKey']).trim();
    const now = Math.floor(Date.now() / 1000);
    const fetcher = forge(key, { iss: 'flint', aud: 'flint-archives', sub: 'flint:fetcher', iat: now, nbf: now, exp: now + 60 });
    for (const [method, p] of await controlPlaneRoutes()) {
      if (p === '/healthz' || p === '/v1/info') continue;
      const r = await call(p, fetcher, method, server.controllerUrl);
      if (method === 'GET' && p.startsWith('/v1/archives/')) assert.equal(r.status, 404, `${method} ${p}: the archive read passes the check (${r.text})`);
      else assert.equal(r.status, 401, `${method} ${p}: ${r.text}`);
    }
    const atRouter = await call('/hello', fetcher);
    assert.equal(atRouter.status, 401);
    assert.match(atRouter.json.message, /this is a fetcher's archive token \(audience flint-archives\)/);
  });

  it('refuses control-plane tokens at the router, and takes them at the control plane', async () => {
    const cp = ok(['token', 'create', '--audience', 'control-plane']).trim();
    assert.equal(payloadOf(cp).aud, 'flint-control-plane');
    for (const p of ['/hello', '/flint-function/hello', '/metrics', '/no-such-route']) {
      const r = await call(p, cp);
      assert.equal(r.status, 401, p);
      assert.deepEqual(r.json, {
        message: 'Unauthorized: this is a control-plane token (audience flint-control-plane); the router takes router tokens (audience flint-router): flint token create',
        statusCode: 401,
      });
    }
    assert.match(ok(['fn', 'list'], { ...elsewhere, FLINT_ADMIN_TOKEN: cp }), /hello/);
    refused(['fn', 'test', '--name', 'hello'], /401.*this is a control-plane token/, { ...elsewhere, FLINT_AUTH_TOKEN: cp });
    // Issued for the username and password too, and only for the right ones.
    const withLogin = ok(['token', 'create', '--audience', 'control-plane', '--username', 'admin', '--password', password], elsewhere).trim();
    assert.equal((await call('/v1/namespaces/default/functions', withLogin, 'GET', server.controllerUrl)).status, 200);
    refused(['token', 'create', '--audience', 'control-plane', '--username', 'admin', '--password', 'wrong'], /^Error: Unauthorized: invalid username or password$/m, elsewhere);
  });

  it("does not pass the caller's Authorization on to functions", async () => {
    const token = ok(['token', 'create', '--username', 'admin', '--password', password]).trim();
    const r = await call('/echo', token);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json['x-flint-function-name'], 'echo', 'the function echoes the headers it got');
    assert.equal(r.json.authorization, undefined, 'the caller\'s token stays at the router');
    const internal = await call('/flint-function/echo', token);
    assert.equal(internal.json.authorization, undefined);
  });

  it("passes the caller's Authorization on with router.forwardAuthorization=true", async () => {
    const fwd = await startServer({ sets: ['authentication.enabled=true', 'router.forwardAuthorization=true'] });
    try {
      ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1'], {}, fwd);
      ok(['fn', 'create', '--name', 'echo', '--env', 'nodejs', '--code', 'echo.js'], {}, fwd);
      ok(['route', 'create', '--name', 'echo', '--url', '/echo', '--function', 'echo'], {}, fwd);
      const token = ok(['token', 'create'], {}, fwd).trim();
      const r = await call('/echo', token, 'GET', fwd.routerUrl);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.authorization, `Bearer ${token}`);
    } finally {
      await fwd.stop();
    }
  });

  it('lets a scoped token reach only its functions and methods, through routes and the internal path', async () => {
    const scoped = ok(['token', 'create', '--function', 'hello', '--method', 'GET']).trim();
    assert.deepEqual(payloadOf(scoped).flint_scope, { f: ['default/hello'], m: ['GET'] });
    assert.equal((await call('/hello', scoped)).text, 'hello\n');
    assert.equal((await call('/flint-function/hello', scoped)).text, 'hello\n');
    assert.equal((await call('/flint-function/default/hello/sub', scoped)).status, 200);
    const forbidden = async (p: string, method: string, why: RegExp) => {
      const r = await call(p, scoped, method);
      assert.equal(r.status, 403, `${method} ${p}: ${r.text}`);
      assert.equal(r.json.code, 'FLINT_ERR_FORBIDDEN');
      assert.match(r.json.message, why);
    };
    await forbidden('/echo', 'GET', /^Forbidden: function default\/echo is not in this token's scope$/);
    await forbidden('/flint-function/echo', 'GET', /function default\/echo is not in this token's scope/);
    await forbidden('/flint-function/other/hello', 'GET', /function other\/hello is not in this token's scope/);
    await forbidden('/hello-post', 'POST', /^Forbidden: method POST is not allowed by this token's scope \(it allows GET\)$/);
    await forbidden('/flint-function/hello', 'DELETE', /method DELETE is not allowed/);
    await forbidden('/canary', 'GET', /function default\/echo is not in this token's scope \(this route may send the request to any of its functions\)/);
    await forbidden('/metrics', 'GET', /a scoped token reaches only its functions/);
    assert.equal((await call('/hello-post', scoped, 'GET')).status, 405, 'the route answers first: it has no GET');

    const pair = ok(['token', 'create', '--function', 'hello', '--function', 'echo']).trim();
    for (let i = 0; i < 6; i++) assert.equal((await call('/canary', pair)).status, 200, 'every function of the canary in scope');
    assert.equal((await call('/hello-post', pair, 'POST')).status, 200, 'no --method: every method');

    const other = ok(['token', 'create', '--namespace', 'other', '--function', 'hello']).trim();
    assert.equal((await call('/flint-function/other/hello', other)).text, 'hello\n');
    assert.equal((await call('/hello', other)).status, 403, 'default/hello is another function');
  });

  it('refuses a scoped token once its ttl is over', async () => {
    const short = ok(['token', 'create', '--function', 'hello', '--ttl', '5s']).trim();
    const claims = payloadOf(short) as { exp: number; iat: number };
    assert.equal(claims.exp - claims.iat, 5);
    await eventually(async () => (await call('/hello', short)).status === 401, 'the 5 s token to expire');
    assert.deepEqual((await call('/hello', short)).json, { message: 'Unauthorized: token is expired', statusCode: 401 });
  });

  it('refuses bad token requests loudly, in the CLI and the API, naming the field', async () => {
    refused(['token', 'create', '--function', 'hello', '--ttl', '1x'], /^Error: --ttl: '1x' is not a duration/m);
    refused(['token', 'create', '--ttl', '25h'], /--ttl: '25h' is longer than the most a token may live, 24h/);
    refused(['token', 'create', '--ttl', '0s'], /--ttl/);
    refused(['token', 'create', '--function', ''], /--function: must be a non-empty name/);
    refused(['token', 'create', '--function', 'Not_A_Name'], /--function: 'Not_A_Name' is not a valid name/);
    refused(['token', 'create', '--function', 'hello', '--method', 'FETCH'], /--method: "FETCH" is not an HTTP method/);
    refused(['token', 'create', '--audience', 'control-plane', '--function', 'hello'], /--function: only router tokens have a scope/);
    refused(['token', 'create', '--audience', 'everything'], /--audience/);
    const post = async (body: unknown) => {
      const res = await fetch(`${server.controllerUrl}/v1/tokens`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as { code: string; field?: string; message: string } };
    };
    for (const [body, field] of [
      [{ ttl: '1x' }, 'ttl'],
      [{ ttl: '48h' }, 'ttl'],
      [{ functions: [''] }, 'functions[0]'],
      [{ functions: ['hello'], methods: ['nope'] }, 'methods[0]'],
      [{ audience: 'control-plane', methods: ['GET'] }, 'methods'],
      [{ namespace: 'other' }, 'namespace'],
      [{ everything: true }, 'everything'],
    ] as const) {
      const r = await post(body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.json.code, 'FLINT_ERR_VALIDATION');
      assert.equal(r.json.field, field, JSON.stringify(body));
    }
    const ok201 = await post({ functions: ['hello'], ttl: '1h' });
    assert.equal(ok201.status, 201);
  });

  it('keeps the README workflows working with the administrator\'s credentials', async () => {
    const creds = { ...elsewhere, FLINT_USERNAME: 'admin', FLINT_PASSWORD: password };
    // FLINT_USERNAME/FLINT_PASSWORD: a control-plane token for the control plane, a router token for fn test.
    assert.match(ok(['fn', 'list'], creds), /hello/);
    assert.match(ok(['route', 'list'], creds), /\/hello/);
    assert.equal(ok(['fn', 'test', '--name', 'hello'], creds), 'hello\n');
    ok(['route', 'create', '--name', 'hello-two', '--url', '/hello-two', '--function', 'hello'], creds);
    // The administrator on the server's machine (the admin-token file) and FLINT_AUTH_TOKEN from token create.
    const token = ok(['token', 'create', '--username', 'admin', '--password', password]).trim();
    assert.equal(ok(['fn', 'test', '--name', 'hello'], { FLINT_AUTH_TOKEN: token }), 'hello\n');
    assert.equal((await call('/hello-two', token)).text, 'hello\n');
    // A control-plane token kept in FLINT_ADMIN_TOKEN, as docs/kubernetes.md shows.
    const cp = ok(['token', 'create', '--audience', 'control-plane', '--username', 'admin', '--password', password, '--ttl', '1h'], elsewhere).trim();
    assert.match(ok(['env', 'list'], { ...elsewhere, FLINT_ADMIN_TOKEN: cp }), /nodejs/);
    // A wrong password, or none: the hint says what to set.
    refused(
      ['env', 'list'],
      /the credentials from FLINT_USERNAME and FLINT_PASSWORD were refused.*\(the control plane said: Unauthorized: invalid username or password\)/,
      { ...elsewhere, FLINT_USERNAME: 'admin', FLINT_PASSWORD: 'wrong' },
    );
    refused(['env', 'list'], /^Error: the control plane requires authentication and no token was sent/m, elsewhere);
  });
});
