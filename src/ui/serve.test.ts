// The dashboard's serving code attacked: paths that try to leave the fixed
// file table (raw `..`, encoded, double-encoded, backslashes, NUL) get a 404
// and never a file or an API answer; the strict headers are on every
// answer; the public shell holds no data, while the dashboard's streams
// and test calls need a token like the rest of the API (none, forged,
// router-audience, expired: 401).
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { createControllerAuthCheck } from '../auth/controller-auth.ts';
import { createTokenIssuer } from '../auth/issuer.ts';
import { createTokenService } from '../auth/tokens.ts';
import { dataLayout } from '../config/layout.ts';
import { createController } from '../controller/app.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { loadAssets } from './assets.ts';
import { CONTENT_SECURITY_POLICY } from './security-headers.ts';

const KEY = 'k'.repeat(43);
const ADMIN = 'A'.repeat(43);
let dir: string;
let store: Store;
let app: FastifyInstance;
let port: number;
let base: string;

/** Sends the request target exactly as written (fetch would normalize the dots away). */
function raw(target: string, headers = ''): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    sock.setEncoding('latin1');
    sock.on('data', (c) => (data += c));
    sock.on('error', reject);
    sock.on('end', () => {
      const [head, ...rest] = data.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), head, body: rest.join('\r\n\r\n') });
    });
    sock.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headers}\r\n`);
  });
}

function forge(claims: Record<string, unknown>, key = KEY): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const head = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${head}.${createHmac('sha256', key).update(head).digest('base64url')}`;
}

describe('dashboard serving', () => {
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ui-serve-'));
    store = openSqliteStore(path.join(dir, 'flint.db'));
    const tokens = createTokenService({ signingKey: KEY, issuer: 'flint', expirySeconds: 120 });
    app = await createController({
      store,
      layout: dataLayout(dir),
      info: () => ({ version: 't', mode: 'local', routerUrl: 'http://127.0.0.1:1', authentication: { enabled: true, authUriPath: '/auth/login' } }),
      localImages: true,
      reservedPaths: [],
      authCheck: createControllerAuthCheck({ adminToken: ADMIN, tokens, credentials: { username: 'admin', password: 'pw' } }),
      issueToken: createTokenIssuer(tokens, 'admin'),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as { port: number }).port;
    base = `http://127.0.0.1:${port}`;
    await store.create({ kind: 'Environment', metadata: { name: 'nodejs', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' } } } as any);
  });
  after(async () => {
    await app.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves the shell without a token, with the strict headers and no data', async () => {
    const res = await fetch(`${base}/ui/`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(res.headers.get('content-security-policy'), CONTENT_SECURITY_POLICY);
    assert.match(CONTENT_SECURITY_POLICY, /script-src 'self'(;|$)/);
    assert.match(CONTENT_SECURITY_POLICY, /frame-ancestors 'none'/);
    assert.doesNotMatch(CONTENT_SECURITY_POLICY, /unsafe-inline|unsafe-eval/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)/, 'no inline script');
    assert.doesNotMatch(html, /nodejs/);
    const js = await fetch(`${base}/ui/app.js`);
    assert.equal(js.status, 200);
    assert.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.equal(js.headers.get('content-encoding'), 'gzip');
    const redirect = await fetch(`${base}/ui`, { redirect: 'manual' });
    assert.equal(redirect.status, 308);
    assert.equal(redirect.headers.get('location'), '/ui/');
    const etag = js.headers.get('etag')!;
    assert.equal((await fetch(`${base}/ui/app.js`, { headers: { 'if-none-match': etag } })).status, 304);
  });

  it('answers paths outside the file table with a JSON 404, never a file or an API answer', async () => {
    const attempts = [
      '/ui/../../etc/passwd',
      '/ui/..%2f..%2fetc%2fpasswd',
      '/ui/%2e%2e/%2e%2e/etc/passwd',
      '/ui/%252e%252e%252fetc%252fpasswd',
      '/ui/..\\..\\etc\\passwd',
      '/ui/app.js%00.html',
      '/ui/./app.js/..',
      '/ui//etc/passwd',
      '/ui/%2fetc%2fpasswd',
      '/ui/../v1/namespaces/default/environments',
      '/ui/%2e%2e/v1/namespaces/default/environments',
      '/ui/x/../../v1/environments',
      '/ui/../openapi.json',
      '/ui/../metrics',
      '/ui/static/app.js',
      '/ui/../src/ui/serve.ts',
    ];
    for (const target of attempts) {
      const r = await raw(target);
      assert.ok(r.status === 404 || r.status === 400, `${target}: ${r.status}`);
      assert.doesNotMatch(r.body, /root:|nodejs|"items"|openapi|flint_controller|import /, `${target} leaked something`);
      if (r.status === 404) assert.match(r.head, /content-security-policy/i, `${target}: headers on the 404`);
    }
    // The index is only the shell at /ui/, not a second name.
    assert.equal((await raw('/ui/index.html')).status, 404);
  });

  it('keeps every dashboard data route behind the token', async () => {
    await store.create({ kind: 'Package', metadata: { name: 'p', namespace: 'default' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: 'eA==' } } } as any);
    await store.create({ kind: 'Function', metadata: { name: 'hello', namespace: 'default' }, spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'p' } } } } as any);
    const now = Math.floor(Date.now() / 1000);
    const credentials: Array<[string, Record<string, string>]> = [
      ['none', {}],
      ['forged key', { authorization: `Bearer ${forge({ iss: 'flint', aud: 'flint-control-plane', nbf: now, exp: now + 60 }, 'x'.repeat(43))}` }],
      ['router audience', { authorization: `Bearer ${forge({ iss: 'flint', aud: 'flint-router', nbf: now, exp: now + 60 })}` }],
      ['expired', { authorization: `Bearer ${forge({ iss: 'flint', aud: 'flint-control-plane', nbf: now - 120, exp: now - 60 })}` }],
      ['alg none', { authorization: `Bearer ${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ iss: 'flint', aud: 'flint-control-plane', exp: now + 60 })).toString('base64url')}.` }],
    ];
    const targets: Array<[string, string, Record<string, string>, string?]> = [
      ['GET', '/v1/watch?kinds=Function', { accept: 'text/event-stream' }],
      ['GET', '/v1/namespaces/default/functions/hello/metrics?follow=true', {}],
      ['GET', '/v1/namespaces/default/functions/hello/logs?follow=true', {}],
      ['POST', '/v1/namespaces/default/functions/hello/invoke', { 'content-type': 'application/json' }, '{"method":"GET"}'],
    ];
    for (const [what, cred] of credentials) {
      for (const [method, target, headers, body] of targets) {
        const res = await fetch(base + target, { method, headers: { ...headers, ...cred }, body });
        const text = await res.text();
        assert.equal(res.status, 401, `${what}: ${method} ${target}: ${text}`);
        assert.equal(JSON.parse(text).code, 'FLINT_ERR_UNAUTHORIZED');
        assert.doesNotMatch(text, /event:|hello/);
      }
    }
  });

  it('reads only regular files of known types from the static folder', () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ui-assets-'));
    try {
      fs.writeFileSync(path.join(d, 'app.js'), 'x');
      fs.writeFileSync(path.join(d, 'secret.key'), 'x');
      fs.symlinkSync('/etc/passwd', path.join(d, 'passwd.txt'));
      fs.mkdirSync(path.join(d, 'dir.js'));
      assert.deepEqual([...loadAssets(d).keys()], ['app.js']);
      assert.equal(loadAssets(path.join(d, 'missing')).size, 0);
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });
});
