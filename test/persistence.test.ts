// Resources survive a server restart, even a SIGKILL, unchanged: same uid,
// same resourceVersion, same content.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { startServer } from './helpers/server.ts';

async function post(base: string, plural: string, body: unknown) {
  const res = await fetch(`${base}/v1/namespaces/default/${plural}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()) as Record<string, unknown>;
}

async function everything(base: string) {
  const out: Record<string, unknown> = {};
  for (const plural of ['environments', 'packages', 'functions', 'httptriggers', 'messagequeuetriggers', 'secrets', 'configmaps']) {
    out[plural] = ((await (await fetch(`${base}/v1/${plural}`)).json()) as { items: unknown[] }).items;
  }
  return out;
}

describe('persistence across restarts', () => {
  for (const how of ['SIGTERM', 'SIGKILL'] as const) {
    it(`keeps every resource with its uid and resourceVersion after ${how}`, async () => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-persist-'));
      try {
        const s1 = await startServer({ dataDir, sets: ['executor.sandbox=none'] });
        await post(s1.controllerUrl, 'environments', { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 0 } });
        await post(s1.controllerUrl, 'packages', {
          metadata: { name: 'p' },
          spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: Buffer.from('module.exports = async () => ({ body: "x" })').toString('base64') } },
        });
        await post(s1.controllerUrl, 'functions', { metadata: { name: 'f' }, spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'p' } } } });
        await post(s1.controllerUrl, 'httptriggers', { metadata: { name: 'r' }, spec: { relativeurl: '/f', functionref: { name: 'f' } } });
        await post(s1.controllerUrl, 'messagequeuetriggers', { metadata: { name: 'q' }, spec: { functionref: { name: 'f' }, messageQueueType: 'kafka', topic: 'in' } });
        await post(s1.controllerUrl, 'secrets', { metadata: { name: 's' }, data: { k: 'v' } });
        await post(s1.controllerUrl, 'configmaps', { metadata: { name: 'c' }, data: { k: 'v' } });
        const before = await everything(s1.controllerUrl);
        if (how === 'SIGKILL') await s1.kill();
        else await s1.stop();
        const s2 = await startServer({ dataDir, sets: ['executor.sandbox=none'] });
        try {
          assert.deepEqual(await everything(s2.controllerUrl), before);
        } finally {
          await s2.stop();
        }
      } finally {
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    });
  }

  it('refuses to start on a bad install value, naming the key', async () => {
    await assert.rejects(startServer({ sets: ['router.prot=1'] }), /unknown install value 'router\.prot'/);
    await assert.rejects(startServer({ sets: ['router.port=abc'] }), /'router\.port' must be an integer/);
    await assert.rejects(startServer({ sets: ['mode=kubernetes', 'kubernetes.apiServer=http://127.0.0.1:1'] }), /Kubernetes API http:\/\/127\.0\.0\.1:1 unreachable/);
    await assert.rejects(startServer({ sets: ['mode=kubernetes', 'kubernetes.apiServer=ftp://x'] }), /install value 'kubernetes\.apiServer' has a bad value "ftp:\/\/x"/);
  });

  it('makes a pre-existing 0755 data directory private: the directory 0700, flint.db with its WAL and SHM and the credentials 0600', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-private-'));
    fs.chmodSync(dataDir, 0o755);
    const mode = (p: string) => fs.lstatSync(p).mode & 0o7777;
    const s = await startServer({ dataDir, sets: ['executor.sandbox=none', 'authentication.enabled=true'] });
    try {
      assert.equal(mode(dataDir), 0o700);
      for (const f of ['flint.db', 'flint.db-wal', 'flint.db-shm']) assert.equal(mode(path.join(dataDir, f)), 0o600, f);
      assert.equal(mode(path.join(dataDir, 'private')), 0o700);
      const privateFiles = fs.readdirSync(path.join(dataDir, 'private'));
      assert.ok(privateFiles.includes('admin-token'), String(privateFiles));
      for (const f of privateFiles) assert.equal(mode(path.join(dataDir, 'private', f)), 0o600, f);
      // A loosened database is put back at the next start.
      await s.stop();
      fs.chmodSync(dataDir, 0o755);
      fs.chmodSync(path.join(dataDir, 'flint.db'), 0o644);
      fs.chmodSync(path.join(dataDir, 'private', 'admin-token'), 0o644);
      const s2 = await startServer({ dataDir, sets: ['executor.sandbox=none', 'authentication.enabled=true'] });
      try {
        assert.equal(mode(dataDir), 0o700);
        assert.equal(mode(path.join(dataDir, 'flint.db')), 0o600);
        assert.equal(mode(path.join(dataDir, 'private', 'admin-token')), 0o600);
      } finally {
        await s2.stop();
      }
    } finally {
      await s.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses to start in a data directory that belongs to another user, naming the owner', { skip: process.getuid?.() !== 0 && 'needs root to chown' }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-foreign-'));
    try {
      fs.chownSync(dataDir, 65534, 65534);
      await assert.rejects(startServer({ dataDir, sets: ['executor.sandbox=none'] }), /data directory .* belongs to .*uid 65534/);
      assert.deepEqual(fs.readdirSync(dataDir), []);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
