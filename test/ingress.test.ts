// Ingress exposure end to end: a real `flint server`, the real CLI, a real
// function, requests through the builtin gateway and through a real nginx.
// Needs `flint server` to start the ingress controller and print
// `ingress listening on http://...` (and `ingress-https listening on https://...`),
// and the CLI's --createingress/--ingress* flags; until both are there each
// case says so and is skipped.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { makeSelfSignedCert } from '../src/ingress/provider.contract.ts';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

interface Answer {
  status: number;
  text: string;
}

/** node:http, since fetch() cannot set Host. */
function request(base: string, p: string, o: { host?: string; headers?: Record<string, string>; ca?: string } = {}): Promise<Answer> {
  const u = new URL(base);
  const secure = u.protocol === 'https:';
  const headers = { ...(o.host ? { host: o.host } : {}), ...(o.headers ?? {}) };
  return new Promise((resolve, reject) => {
    const opts = { host: u.hostname, port: u.port, path: p, headers, agent: false as const };
    const onRes = (res: http.IncomingMessage) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    };
    const req = secure ? https.get({ ...opts, servername: o.host, ca: o.ca }, onRes) : http.get(opts, onRes);
    req.on('error', reject);
  });
}

function scenario(provider: 'builtin' | 'nginx') {
  describe(`ingress exposure through flint server (${provider})`, () => {
    let server: TestServer;
    let work: string;
    let ingressUrl: string | undefined;
    let ingressHttpsUrl: string | undefined;
    let missing = '';

    const ok = (args: string[]) => {
      const r = flint(server, args, { cwd: work });
      assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
      return r.stdout;
    };
    const ready = (t: TestContext) => {
      if (missing) t.skip(missing);
      return !missing;
    };

    before(async () => {
      work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ingress-sys-'));
      server = await startServer({ sets: [`ingress.provider=${provider}`] });
      const out = server.output();
      ingressUrl = /^ingress listening on (\S+)$/m.exec(out)?.[1];
      ingressHttpsUrl = /^ingress-https listening on (\S+)$/m.exec(out)?.[1];
      const help = flint(server, ['route', 'create', '--help']);
      if (!ingressUrl) missing = 'flint server does not start the ingress yet (see src/ingress/index.ts)';
      else if (!/--ingressrule/.test(help.stdout + help.stderr)) missing = 'the CLI has no --ingressrule yet (see src/ingress/flags.ts)';
      if (missing) return;
      ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
      fs.writeFileSync(path.join(work, 'hello.js'), 'module.exports = async (context) => ({ status: 200, body: "hello " + context.request.url });');
      ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', path.join(work, 'hello.js')]);
    });
    after(async () => {
      await server?.stop();
      fs.rmSync(work, { recursive: true, force: true });
    });

    it('exposes a route only with --createingress', async (t) => {
      if (!ready(t)) return;
      ok(['route', 'create', '--name', 'inner', '--url', '/inner', '--function', 'hello']);
      await eventually(async () => (await request(server.routerUrl, '/inner')).status === 200, 'the route at the router');
      const hidden = await request(ingressUrl!, '/inner');
      assert.equal(hidden.status, 404);
      assert.equal(hidden.text, 'default backend - 404');

      ok(['route', 'create', '--name', 'outer', '--url', '/outer', '--function', 'hello', '--createingress']);
      const shown = await eventually(async () => {
        const a = await request(ingressUrl!, '/outer');
        return a.status === 200 ? a : undefined;
      }, 'the route at the gateway');
      assert.match(shown.text, /^hello /);
      const list = ok(['route', 'list']);
      assert.match(list, /INGRESS/);
      assert.match(list.split('\n').find((l) => l.startsWith('outer')) ?? '', /\btrue\b/);
      assert.match(list.split('\n').find((l) => l.startsWith('inner')) ?? '', /\bfalse\b/);
    });

    it('selects by Host with --ingressrule and follows route update', async (t) => {
      if (!ready(t)) return;
      ok(['route', 'create', '--name', 'hosted', '--url', '/hosted', '--function', 'hello', '--createingress', '--ingressrule', 'a.example.test=/hosted']);
      await eventually(async () => (await request(ingressUrl!, '/hosted', { host: 'a.example.test' })).status === 200, 'the host rule');
      assert.equal((await request(ingressUrl!, '/hosted', { host: 'b.example.test' })).text, 'default backend - 404');
      ok(['route', 'update', '--name', 'hosted', '--ingressrule', '*=/elsewhere/*']);
      await eventually(async () => (await request(ingressUrl!, '/elsewhere/x', { host: 'b.example.test' })).status === 200, 'the new rule');
      // nginx lets old workers finish the connections they hold after a
      // reload, so the old rule may answer once more on a reused connection.
      await eventually(async () => (await request(ingressUrl!, '/hosted', { host: 'a.example.test' })).status === 404, 'the old rule to go');
      for (const bad of ['novalue', 'a=b=c', '=/x', 'a.example.test=']) {
        const r = flint(server, ['route', 'update', '--name', 'hosted', '--ingressrule', bad]);
        assert.notEqual(r.code, 0, `--ingressrule ${bad} is refused`);
        assert.match(r.stderr, /--ingressrule/);
      }
    });

    it('serves HTTPS with a self-signed certificate from --ingresstls', async (t) => {
      if (!ready(t)) return;
      if (!ingressHttpsUrl) return t.skip('flint server prints no ingress-https URL');
      const cert = makeSelfSignedCert(work, 'secure.example.test');
      const files = ['crt', 'key'].map((k) => `--from-file=tls.${k}=${path.join(work, `secure.example.test.${k}`)}`);
      ok(['secret', 'create', '--name', 'secure-tls', ...files]);
      ok(['route', 'create', '--name', 'secure', '--url', '/secure', '--function', 'hello', '--createingress', '--ingressrule', 'secure.example.test=/secure', '--ingresstls', 'secure-tls']);
      const a = await eventually(async () => {
        const x = await request(ingressHttpsUrl!, '/secure', { host: 'secure.example.test', ca: cert.cert });
        return x.status === 200 ? x : undefined;
      }, 'HTTPS through the ingress');
      assert.match(a.text, /^hello /);
    });

    it('removes the exposure with --createingress=false and with the route', async (t) => {
      if (!ready(t)) return;
      ok(['route', 'create', '--name', 'brief', '--url', '/brief', '--function', 'hello', '--createingress']);
      await eventually(async () => (await request(ingressUrl!, '/brief')).status === 200, 'exposed');
      ok(['route', 'update', '--name', 'brief', '--createingress=false']);
      await eventually(async () => (await request(ingressUrl!, '/brief')).text === 'default backend - 404', 'hidden again');
      ok(['route', 'update', '--name', 'brief', '--createingress']);
      await eventually(async () => (await request(ingressUrl!, '/brief')).status === 200, 'exposed again');
      ok(['route', 'delete', '--name', 'brief']);
      await eventually(async () => (await request(ingressUrl!, '/brief')).text === 'default backend - 404', 'gone with the route');
    });
  });
}

scenario('builtin');
scenario('nginx');

describe('ingress with authentication on', () => {
  let server: TestServer;
  let work: string;
  let ingressUrl: string | undefined;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ingress-auth-'));
    server = await startServer({ sets: ['authentication.enabled=true'] });
    ingressUrl = /^ingress listening on (\S+)$/m.exec(server.output())?.[1];
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('needs the token through the ingress just as at the router', async (t) => {
    const help = flint(server, ['route', 'create', '--help']);
    if (!ingressUrl || !/--ingressrule/.test(help.stdout + help.stderr)) return t.skip('ingress not wired into flint server and the CLI yet');
    const ok = (args: string[]) => {
      const r = flint(server, args, { cwd: work });
      assert.equal(r.code, 0, `flint ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`);
    };
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    fs.writeFileSync(path.join(work, 'a.js'), 'module.exports = async () => ({ status: 200, body: "secret stuff" });');
    ok(['fn', 'create', '--name', 'guarded', '--env', 'nodejs', '--code', path.join(work, 'a.js')]);
    ok(['route', 'create', '--name', 'guarded', '--url', '/guarded', '--function', 'guarded', '--createingress']);
    const denied = await eventually(async () => {
      const a = await request(ingressUrl!, '/guarded');
      return a.status === 401 ? a : undefined;
    }, 'the router to refuse a request without a token through the ingress');
    assert.equal(JSON.parse(denied.text).message, 'Unauthorized: malformed Token');
    const password = flint(server, ['secret', 'get', '--name', 'router', '--namespace', 'flint', '--key', 'password']).stdout.trim();
    const accesstoken = flint(server, ['token', 'create', '--username', 'admin', '--password', password]).stdout.trim();
    const allowed = await request(ingressUrl!, '/guarded', { headers: { authorization: `Bearer ${accesstoken}` } });
    assert.equal(allowed.status, 200);
    assert.equal(allowed.text, 'secret stuff');
  });
});
