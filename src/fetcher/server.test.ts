import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { zipFiles } from '../archive/index.ts';
import { type RunningRuntime, startRuntime, tcpProxy } from '../runtimes/node/testing.ts';
import { parseSpecializeRequest } from './request.ts';
import { type RunningFetcher, startFetcher } from './server.ts';

const HELLO = "module.exports = async (ctx) => ({ status: 200, body: 'hello from ' + (process.env.WHO || 'nobody') });\n";

/** A runtime with a fetcher beside it, sharing its userfunc directory, as in a pool pod. */
async function pod(token?: string): Promise<{ rt: RunningRuntime; fetcher: RunningFetcher; userfunc: string; secrets: string; close(): Promise<void> }> {
  const rt = await startRuntime();
  const proxy = await tcpProxy(rt.socket);
  const userfunc = path.join(rt.dir, 'userfunc');
  const secrets = path.join(rt.dir, 'secrets');
  const fetcher = await startFetcher({
    host: '127.0.0.1',
    port: 0,
    userfuncDir: userfunc,
    secretsDir: secrets,
    configsDir: path.join(rt.dir, 'configs'),
    envUrl: `http://127.0.0.1:${proxy.port}`,
    log: () => {},
    token,
  });
  return {
    rt,
    fetcher,
    userfunc,
    secrets,
    async close() {
      await fetcher.close();
      proxy.close();
      await rt.stop();
    },
  };
}

function post(url: string, body: unknown, authorization?: string): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) };
  return fetch(`${url}/specialize`, { method: 'POST', headers, body: JSON.stringify(body) }).then(async (r) => ({
    status: r.status,
    json: await r.json(),
  }));
}

function literalRequest(userfunc: string, code: string, extra: Record<string, unknown> = {}) {
  return {
    FetchReq: { fetchType: 1, filename: 'deployarchive', literal: Buffer.from(code).toString('base64'), ...extra },
    LoadReq: { filepath: path.join(userfunc, 'deployarchive'), functionName: '', envVersion: 2, env: { WHO: 'the fetcher' } },
  };
}

describe('fetcher', () => {
  let archiveServer: http.Server;
  let archiveUrl = '';
  let zipSha = '';
  const served: Array<string | undefined> = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-fetcher-'));

  before(async () => {
    fs.mkdirSync(path.join(dir, 'src'));
    fs.writeFileSync(path.join(dir, 'src', 'index.js'), HELLO);
    const zip = path.join(dir, 'code.zip');
    zipSha = (await zipFiles([{ path: path.join(dir, 'src', 'index.js'), name: 'index.js' }], zip)).sha256;
    const bytes = fs.readFileSync(zip);
    archiveServer = http.createServer((req, res) => {
      served.push(req.headers.authorization);
      if (req.url === '/v1/archives/code') return res.end(bytes);
      res.writeHead(404).end('no such archive');
    });
    await new Promise<void>((r) => archiveServer.listen(0, '127.0.0.1', r));
    archiveUrl = `http://127.0.0.1:${(archiveServer.address() as AddressInfo).port}/v1/archives`;
  });
  after(async () => {
    await new Promise<void>((r) => archiveServer.close(() => r()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('loads a literal single-file function into the environment beside it, once', async () => {
    const p = await pod();
    try {
      assert.equal((await fetch(`${p.fetcher.url}/readiness-healthz`)).status, 200);
      const first = await post(p.fetcher.url, literalRequest(p.userfunc, HELLO));
      assert.equal(first.status, 200, JSON.stringify(first.json));
      const reply = await p.rt.request('/');
      assert.equal(reply.body.toString(), 'hello from the fetcher');
      const again = await post(p.fetcher.url, literalRequest(p.userfunc, HELLO));
      assert.equal(again.status, 409);
      assert.match(again.json.error, /already specialized/);
    } finally {
      await p.close();
    }
  });

  it('downloads a zip with the Authorization given, checks its sha256, unpacks it and writes Secrets and ConfigMaps as files', async () => {
    const p = await pod();
    try {
      const res = await post(p.fetcher.url, {
        FetchReq: {
          fetchType: 1,
          filename: 'deployarchive',
          url: `${archiveUrl}/code`,
          checksum: zipSha,
          authorization: 'Bearer pod-token',
          secrets: { 'default/db': { password: 's3cret' } },
          configmaps: { 'default/cfg': { mode: 'fast' } },
        },
        LoadReq: { filepath: path.join(p.userfunc, 'deployarchive'), functionName: 'index', envVersion: 2 },
      });
      assert.equal(res.status, 200, JSON.stringify(res.json));
      assert.equal(served.at(-1), 'Bearer pod-token');
      assert.ok(fs.statSync(path.join(p.userfunc, 'deployarchive')).isDirectory(), 'the zip is unpacked');
      assert.equal(fs.readFileSync(path.join(p.secrets, 'default', 'db', 'password'), 'utf8'), 's3cret');
      assert.equal(fs.statSync(path.join(p.secrets, 'default', 'db', 'password')).mode & 0o777, 0o400);
      assert.equal(fs.readFileSync(path.join(p.rt.dir, 'configs', 'default', 'cfg', 'mode'), 'utf8'), 'fast');
      assert.equal((await p.rt.request('/')).body.toString(), 'hello from nobody');
    } finally {
      await p.close();
    }
  });

  it("refuses to write a Secret through a link planted in the pod's secrets volume, writing nothing where it points", async () => {
    const p = await pod();
    const outside = path.join(dir, 'outside-secrets');
    fs.mkdirSync(outside);
    try {
      fs.mkdirSync(p.secrets, { recursive: true });
      fs.symlinkSync(outside, path.join(p.secrets, 'default'));
      const res = await post(p.fetcher.url, literalRequest(p.userfunc, HELLO, { secrets: { 'default/db': { password: 's3cret' } } }));
      assert.equal(res.status, 500);
      assert.match(res.json.error, /secrets\/default: it is a symbolic link/);
      assert.deepEqual(fs.readdirSync(outside), []);
    } finally {
      await p.close();
    }
  });

  it('refuses an archive whose sha256 differs, and leaves nothing of it', async () => {
    const p = await pod();
    try {
      const wrong = createHash('sha256').update('other').digest('hex');
      const res = await post(p.fetcher.url, {
        FetchReq: { fetchType: 1, filename: 'deployarchive', url: `${archiveUrl}/code`, checksum: wrong },
        LoadReq: { filepath: path.join(p.userfunc, 'deployarchive') },
      });
      assert.equal(res.status, 502);
      assert.match(res.json.error, new RegExp(`sha256 is ${zipSha}, expected ${wrong}`));
      assert.deepEqual(fs.readdirSync(p.userfunc), []);
      assert.match((await post(p.fetcher.url, literalRequest(p.userfunc, HELLO))).json.error, /specialization failed/);
    } finally {
      await p.close();
    }
  });

  it('reports the environment refusing the code (a syntax error) as a 500 naming it', async () => {
    const p = await pod();
    try {
      const res = await post(p.fetcher.url, literalRequest(p.userfunc, 'module.exports = async (ctx => {'));
      assert.equal(res.status, 500);
      assert.match(res.json.error, /the environment refused to load the function: 5\d\d/);
    } finally {
      await p.close();
    }
  });

  it('waits for an environment that is not listening yet', async () => {
    const rt = await startRuntime();
    const userfunc = path.join(rt.dir, 'userfunc');
    // A port nothing listens on until the proxy opens it.
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const fetcher = await startFetcher({ host: '127.0.0.1', port: 0, userfuncDir: userfunc, secretsDir: path.join(rt.dir, 's'), configsDir: path.join(rt.dir, 'c'), envUrl: `http://127.0.0.1:${port}`, log: () => {} });
    let proxy: { close(): void } | undefined;
    try {
      const pending = post(fetcher.url, literalRequest(userfunc, HELLO));
      await new Promise((r) => setTimeout(r, 300));
      proxy = await tcpProxyOn(rt.socket, port);
      const res = await pending;
      assert.equal(res.status, 200, JSON.stringify(res.json));
    } finally {
      proxy?.close();
      await fetcher.close();
      await rt.stop();
    }
  });

  it("takes a specialize request only with the executor's token when it has one, and stays generic otherwise", async () => {
    const p = await pod('the-executors-token');
    try {
      for (const authorization of [undefined, 'Bearer wrong', 'the-executors-token']) {
        const denied = await post(p.fetcher.url, literalRequest(p.userfunc, HELLO), authorization);
        assert.equal(denied.status, 401, String(authorization));
        assert.match(denied.json.error, /fetcher token/);
      }
      assert.equal(fs.existsSync(path.join(p.userfunc, 'deployarchive')), false, 'nothing was written');
      assert.equal((await post(p.fetcher.url, literalRequest(p.userfunc, HELLO), 'Bearer the-executors-token')).status, 200);
    } finally {
      await p.close();
    }
  });

  it('refuses a bad request with 400 and stays generic', async () => {
    const p = await pod();
    try {
      const bad = await post(p.fetcher.url, { FetchReq: { fetchType: 0 }, LoadReq: {} });
      assert.equal(bad.status, 400);
      assert.match(bad.json.error, /fetchType 0 is not supported/);
      assert.equal((await post(p.fetcher.url, literalRequest(p.userfunc, HELLO))).status, 200);
    } finally {
      await p.close();
    }
  });
});

describe('specialize request', () => {
  const ok = { FetchReq: { fetchType: 1, literal: 'eA==' }, LoadReq: { filepath: '/userfunc/deployarchive' } };
  const refuses = (body: unknown, re: RegExp) => assert.throws(() => parseSpecializeRequest(body), re);

  it('takes Fission\'s shape and fills the defaults', () => {
    const r = parseSpecializeRequest(ok);
    assert.equal(r.FetchReq.filename, 'deployarchive');
    assert.equal(r.FetchReq.keeparchive, false);
  });

  it('refuses what could write outside its directories or is not what it seems', () => {
    refuses({ ...ok, FetchReq: { ...ok.FetchReq, filename: '../x' } }, /filename '\.\.\/x' is not a plain file name/);
    refuses({ ...ok, FetchReq: { ...ok.FetchReq, secrets: { '../etc/x': { a: 'b' } } } }, /is not <namespace>\/<name>/);
    refuses({ ...ok, FetchReq: { ...ok.FetchReq, secrets: { 'default/db': { '..': 'b' } } } }, /key '\.\.' is not a valid file name/);
    refuses({ ...ok, FetchReq: { ...ok.FetchReq, secrets: { 'default/db': { 'a/b': 'c' } } } }, /key 'a\/b' is not a valid file name/);
    refuses({ ...ok, FetchReq: { fetchType: 1 } }, /exactly one of url and literal/);
    refuses({ ...ok, FetchReq: { fetchType: 1, url: 'file:///etc/passwd' } }, /is not an http\(s\) URL/);
    refuses({ ...ok, FetchReq: { ...ok.FetchReq, checksum: 'abc' } }, /64 hex digits/);
    refuses({ ...ok, LoadReq: {} }, /LoadReq.filepath is required/);
    refuses({ ...ok, LoadReq: { ...ok.LoadReq, envVersion: 4 } }, /envVersion must be 1, 2 or 3/);
    refuses([], /must be a JSON object/);
  });
});

/** Like tcpProxy, on a chosen port. */
async function tcpProxyOn(socketPath: string, port: number): Promise<{ close(): void }> {
  const net = await import('node:net');
  const server = net.createServer((c) => {
    const up = net.connect({ path: socketPath });
    c.pipe(up).pipe(c);
    c.on('error', () => up.destroy());
    up.on('error', () => c.destroy());
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return { close: () => server.close() };
}
