import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { findNginx, type NginxProvider, nginxLayout, quote, renderGeneration, startLocalNginx } from './nginx.ts';
import { httpSender, ingress, runIngressProviderContract, sendUpgrade, startEchoRouter } from './provider.contract.ts';

const nginxBin = findNginx();
if (!nginxBin) throw new Error('nginx is not installed: apt-get install -y nginx');

let nginx: NginxProvider | undefined;

runIngressProviderContract('nginx', {
  async setup({ routerUrl, tmpDir }) {
    nginx = await startLocalNginx({ workDir: path.join(tmpDir, 'nginx'), routerUrl, port: 0, httpsPort: 0 });
    const n = nginx;
    return {
      provider: n,
      send: httpSender(() => ({ url: n.url, httpsUrl: n.httpsUrl })),
      listener: () => ({ url: n.url, httpsUrl: n.httpsUrl }),
      capabilities: { traffic: true, https: true, rewrite: true, strictPaths: true },
    };
  },
  async teardown() {
    await nginx?.stop();
  },
});

describe('nginx provider', () => {
  let dir: string;
  let router: Awaited<ReturnType<typeof startEchoRouter>>;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-nginx-'));
    router = await startEchoRouter();
  });
  after(async () => {
    await router.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('quotes strings so nginx reads them back unchanged', () => {
    assert.equal(quote('/a"b\\c'), '"/a\\"b\\\\c"');
    assert.throws(() => quote('a\nb'), /control characters/);
  });

  it('writes one location file per ingress and one server file per host', () => {
    const layout = nginxLayout(dir);
    const r = renderGeneration([ingress('a', { host: 'a.example.test' }), ingress('b'), ingress('c', { host: 'a.example.test', path: '/c/*', url: '/c' })], {
      dir: path.join(dir, 'gen'),
      generation: 3,
      layout,
      listenHost: '127.0.0.1',
      port: 1234,
    });
    const names = [...r.files.keys()].sort();
    assert.deepEqual(names, ['ingress/a.conf', 'ingress/b.conf', 'ingress/c.conf', 'servers/00-status.conf', 'servers/10-default.conf', 'servers/20-host-0000.conf']);
    const host = r.files.get('servers/20-host-0000.conf')!;
    assert.match(host, /server_name "a\.example\.test";/);
    // The any-host ingress is served on the named host too.
    for (const n of ['a', 'b', 'c']) assert.ok(host.includes(`ingress/${n}.conf`), `host server includes ${n}`);
    assert.match(r.files.get('servers/10-default.conf')!, /return 404 "default backend - 404";/);
    assert.match(r.files.get('ingress/c.conf')!, /location = "\/c" \{[\s\S]*location "\/c\/" \{/);
  });

  it('refuses paths nginx config cannot carry, and duplicate locations, per ingress', () => {
    const r = renderGeneration([ingress('dollar', { path: '/a$b', url: '/a' }), ingress('first', { url: '/same' }), ingress('second', { path: '/same', url: '/x' })], {
      dir: path.join(dir, 'gen2'),
      generation: 1,
      layout: nginxLayout(dir),
      listenHost: '127.0.0.1',
      port: 1234,
    });
    assert.deepEqual(r.skipped.map((s) => s.name).sort(), ['dollar', 'second']);
  });

  it('keeps the live config when nginx refuses a new one, and leaves nothing half-written', async () => {
    const work = path.join(dir, 'refuse');
    const n = await startLocalNginx({ workDir: work, routerUrl: router.url, port: 0 });
    try {
      await n.apply([ingress('keep')]);
      const live = fs.readlinkSync(path.join(work, 'conf', 'current'));
      // A template whose regex PCRE rejects ((?<=a+) is a variable-length lookbehind) gets past our
      // checks but not nginx -t: that ingress is dropped, the rest applied.
      const res = await n.apply([ingress('keep'), ingress('tpl', { path: '/t/{x:(?<=a+)b}', url: '/t/{x:(?<=a+)b}' })]);
      assert.deepEqual(
        res.skipped.map((s) => s.name),
        ['tpl'],
      );
      assert.match(res.skipped[0].reason, /nginx refuses/);
      const now = fs.readlinkSync(path.join(work, 'conf', 'current'));
      assert.notEqual(now, live);
      assert.deepEqual(fs.readdirSync(path.join(work, 'conf')).sort(), ['current', now].sort(), 'older generations are removed');
      const ok = await fetch(`${n.url}/keep`, { headers: { host: 'h.test' } });
      assert.equal(ok.status, 200);
      await ok.text();
    } finally {
      await n.stop();
    }
  });

  it('stops an nginx a killed server left running before starting its own', async () => {
    const work = path.join(dir, 'stale');
    const first = await startLocalNginx({ workDir: work, routerUrl: router.url, port: 0 });
    const stalePid = first.pid!;
    // A second provider on the same work dir stands for the restarted server.
    const second = await startLocalNginx({ workDir: work, routerUrl: router.url, port: 0 });
    try {
      assert.notEqual(second.pid, stalePid);
      assert.equal(first.pid, undefined, 'the leftover nginx is gone');
      await second.apply([ingress('fresh')]);
      const res = await fetch(`${second.url}/fresh`);
      assert.equal(res.status, 200);
      await res.text();
    } finally {
      await second.stop();
      await first.stop();
    }
  });

  it('applies a change to kept-alive connections at once while a WebSocket keeps an old worker running', async () => {
    const n = await startLocalNginx({ workDir: path.join(dir, 'ws-reload'), routerUrl: router.url, port: 0 });
    try {
      await n.apply([ingress('ws'), ingress('old')]);
      const send = httpSender(() => ({ url: n.url }));
      assert.equal((await send({ host: 'h.test', path: '/old' })).kind, 'router');
      const c = await sendUpgrade({ url: n.url, host: 'h.test', path: '/ws' });
      assert.equal(c.status, 101, c.raw);
      await n.apply([ingress('ws'), ingress('new')]);
      // The first request goes on the connection kept alive from before the change.
      assert.equal((await send({ host: 'h.test', path: '/old' })).kind, 'default', 'no connection is served with the old config');
      assert.equal((await send({ host: 'h.test', path: '/new' })).kind, 'router');
      c.socket.write('still');
      assert.equal((await c.read(5)).toString(), 'still', 'the WebSocket on the old worker carries on');
      c.socket.destroy();
    } finally {
      await n.stop();
    }
  });

  it('restarts an nginx that died on the next change', async () => {
    const work = path.join(dir, 'restart');
    const n = await startLocalNginx({ workDir: work, routerUrl: router.url, port: 0 });
    const port = new URL(n.url).port;
    try {
      process.kill(n.pid!, 'SIGKILL');
      const deadline = Date.now() + 10_000;
      while (n.pid !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.equal(n.pid, undefined);
      // SIGKILL of the master leaves its worker holding the port; it exits once the master is gone.
      await n.apply([ingress('back')]);
      const res = await fetch(`${n.url}/back`);
      assert.equal(res.status, 200);
      await res.text();
      assert.equal(new URL(n.url).port, port);
    } finally {
      await n.stop();
    }
    const stale = spawnSync('pgrep', ['-f', path.join(work, 'nginx.conf')], { encoding: 'utf8' });
    assert.equal(stale.stdout.trim(), '', 'no nginx of ours is left running');
  });
});
