// Packages through the controller: archive upload and download, the build
// status a write leads to, rebuild, refused archives, and garbage collection.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { LocalArchiveStore } from '../archive/index.ts';
import { rawZip } from '../archive/testing.ts';
import { dataLayout } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { createController } from './app.ts';
import { ArchiveGc } from './archive-gc.ts';

let dir: string;
let store: Store;
let archives: LocalArchiveStore;
let app: FastifyInstance;
let base: string;
const NS = '/v1/namespaces/default';

async function call(method: string, url: string, body?: unknown, contentType = 'application/json') {
  const init: RequestInit = { method, headers: {} };
  if (body !== undefined) {
    init.body = Buffer.isBuffer(body) ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] = contentType;
  }
  const res = await fetch(base + url, init);
  const buf = Buffer.from(await res.arrayBuffer());
  let json: any;
  try {
    json = JSON.parse(buf.toString());
  } catch {}
  return { status: res.status, json, buf };
}


const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const lit = (s: string) => ({ type: 'literal', literal: Buffer.from(s).toString('base64') });

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-pkgapi-'));
  const layout = dataLayout(dir);
  store = openSqliteStore(layout.db);
  archives = new LocalArchiveStore(layout.archives);
  app = await createController({ store, layout, info: () => ({}) as any, localImages: true, reservedPaths: [], archives, maxUploadBytes: 1024 * 1024 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  await call('POST', `${NS}/environments`, { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, builder: { image: 'flint/node-builder' } } });
});

after(async () => {
  await app.close();
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('archive API', () => {
  it('stores an upload by content and gives it back', async () => {
    const bytes = Buffer.from('some archive bytes');
    const r = await call('POST', '/v1/archives', bytes, 'application/octet-stream');
    assert.equal(r.status, 201, r.buf.toString());
    assert.deepEqual(r.json, { url: `/v1/archives/${sha(bytes)}`, checksum: { type: 'sha256', sum: sha(bytes) }, size: bytes.length });
    const back = await call('GET', r.json.url);
    assert.equal(back.status, 200);
    assert.deepEqual(back.buf, bytes);
  });

  it('refuses an upload whose checksum does not match, keeping nothing', async () => {
    const bytes = Buffer.from('other bytes');
    const r = await call('POST', `/v1/archives?sha256=${'0'.repeat(64)}`, bytes, 'application/octet-stream');
    assert.equal(r.status, 400);
    assert.equal(r.json.code, 'FLINT_ERR_BAD_ARCHIVE');
    assert.equal(await archives.get(sha(bytes)), undefined);
  });

  it('refuses an upload over the size limit (413) and a JSON body (415)', async () => {
    const big = Buffer.alloc(2 * 1024 * 1024, 1);
    const r = await call('POST', '/v1/archives', big, 'application/octet-stream');
    assert.equal(r.status, 413);
    assert.equal(r.json.code, 'FLINT_ERR_PAYLOAD_TOO_LARGE');
    const j = await call('POST', '/v1/archives', { a: 1 });
    assert.equal(j.status, 415);
  });

  it('answers 404 for an unknown archive and 400 for a malformed id', async () => {
    assert.equal((await call('GET', `/v1/archives/${'a'.repeat(64)}`)).status, 404);
    assert.equal((await call('GET', '/v1/archives/nothex')).status, 400);
    for (const bad of ['nothex', '..%2F..%2Fflint.db', 'A'.repeat(64)]) {
      const r = await call('DELETE', `/v1/archives/${bad}`);
      assert.equal(r.status, 400, bad);
      assert.equal(r.json.code, 'FLINT_ERR_VALIDATION');
      assert.equal((await call('HEAD', `/v1/archives/${bad}`)).status, 400);
    }
    assert.equal((await call('HEAD', `/v1/archives/${'a'.repeat(64)}`)).status, 404);
    const gone = await call('DELETE', `/v1/archives/${'a'.repeat(64)}`);
    assert.equal(gone.status, 404);
    assert.equal(gone.json.code, 'FLINT_ERR_NOT_FOUND');
  });

  it('lists archives with the packages that refer to them, and refuses to delete one in use, naming the package', async () => {
    const used = Buffer.from('archive a package uses');
    const orphan = Buffer.from('archive nobody uses');
    for (const b of [used, orphan]) assert.equal((await call('POST', '/v1/archives', b, 'application/octet-stream')).status, 201);
    const pkg = { metadata: { name: 'uses-archive' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'url', url: `/v1/archives/${sha(used)}`, checksum: { type: 'sha256', sum: sha(used) } } } };
    assert.equal((await call('POST', `${NS}/packages`, pkg)).status, 201);
    const list = await call('GET', '/v1/archives');
    assert.equal(list.status, 200);
    const byId = new Map((list.json.items as Array<{ sha256: string; packages: string[] }>).map((i) => [i.sha256, i]));
    assert.deepEqual({ ...byId.get(sha(used)), createdAt: 0 }, { sha256: sha(used), url: `/v1/archives/${sha(used)}`, size: used.length, createdAt: 0, packages: ['default/uses-archive'] });
    assert.deepEqual(byId.get(sha(orphan))?.packages, []);
    const head = await fetch(`${base}/v1/archives/${sha(used)}`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(used.length));

    const refused = await call('DELETE', `/v1/archives/${sha(used)}`);
    assert.equal(refused.status, 409);
    assert.equal(refused.json.code, 'FLINT_ERR_IN_USE');
    assert.match(refused.json.message, /is used by package 'default\/uses-archive'/);
    assert.ok(await archives.get(sha(used)));
    const deleted = await call('DELETE', `/v1/archives/${sha(orphan)}`);
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.json, { sha256: sha(orphan) });
    assert.equal(await archives.get(sha(orphan)), undefined);
    assert.equal((await call('DELETE', `${NS}/packages/uses-archive`)).status, 200);
    assert.equal((await call('DELETE', `/v1/archives/${sha(used)}`)).status, 200);
  });
});

describe('package status through the API', () => {
  it('a deploy-only package is succeeded at once; a source package is pending', async () => {
    const d = await call('POST', `${NS}/packages`, { metadata: { name: 'deploy-only' }, spec: { environment: { name: 'nodejs' }, deployment: lit('x') } });
    assert.equal(d.status, 201);
    assert.equal(d.json.status.buildstatus, 'succeeded');
    const s = await call('POST', `${NS}/packages`, { metadata: { name: 'src-only' }, spec: { environment: { name: 'nodejs' }, source: lit('y') } });
    assert.equal(s.json.status.buildstatus, 'pending');
  });

  it('a new source sets pending and keeps the deployment until the build replaces it', async () => {
    const cur = (await call('GET', `${NS}/packages/src-only`)).json;
    await store.update({ ...cur, spec: { ...cur.spec, deployment: lit('built') }, status: { buildstatus: 'succeeded', buildlog: 'ok' } });
    const built = (await call('GET', `${NS}/packages/src-only`)).json;
    const r = await call('PUT', `${NS}/packages/src-only`, { ...built, spec: { ...built.spec, source: lit('y2') } });
    assert.equal(r.status, 200);
    assert.equal(r.json.status.buildstatus, 'pending');
    assert.deepEqual(r.json.spec.deployment, lit('built'));
    // A label change is no reason to build again.
    const again = await call('PUT', `${NS}/packages/src-only`, { ...r.json, metadata: { ...r.json.metadata, labels: { a: 'b' } } });
    assert.equal(again.json.status.buildstatus, 'pending');
  });

  it('refuses a build command with shell syntax, naming the field', async () => {
    const r = await call('POST', `${NS}/packages`, { metadata: { name: 'bad-cmd' }, spec: { environment: { name: 'nodejs' }, source: lit('z'), buildcmd: 'npm install && rm -rf /' } });
    assert.equal(r.status, 400);
    assert.equal(r.json.field, 'spec.buildcmd');
    assert.match(r.json.message, /shell metacharacter "&"/);
  });

  it('refuses archive URLs it cannot use, and literals over 256 KiB', async () => {
    for (const [url, re] of [
      ['/v1/archives/abc', /not a stored archive/],
      ['ftp://example.com/a.zip', /unsupported URL scheme/],
      ['not a url', /neither a stored archive/],
    ] as const) {
      const r = await call('POST', `${NS}/packages`, { metadata: { name: 'bad-url' }, spec: { environment: { name: 'nodejs' }, source: { type: 'url', url } } });
      assert.equal(r.status, 400, url);
      assert.equal(r.json.field, 'spec.source.url');
      assert.match(r.json.message, re);
    }
    const big = { type: 'literal', literal: Buffer.alloc(300 * 1024).toString('base64') };
    const r = await call('POST', `${NS}/packages`, { metadata: { name: 'big-lit' }, spec: { environment: { name: 'nodejs' }, deployment: big } });
    assert.equal(r.status, 400);
    assert.match(r.json.message, /limited to 256 KiB/);
    assert.equal((await call('GET', `${NS}/packages/big-lit`)).status, 404);
  });

  it('refuses a zip with an unsafe entry, and a stored archive that was never uploaded', async () => {
    const slip = rawZip('../../escape.js', Buffer.from('x'));
    const r = await call('POST', `${NS}/packages`, { metadata: { name: 'slip' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: slip.toString('base64') } } });
    assert.equal(r.status, 400);
    assert.equal(r.json.code, 'FLINT_ERR_BAD_ARCHIVE');
    assert.equal(r.json.field, 'spec.deployment');
    assert.match(r.json.message, /^spec\.deployment: .*'?\.\.\/\.\.\/escape\.js/);
    // Uploaded on its own, it is refused the same way and not kept.
    const up = await call('POST', '/v1/archives', slip, 'application/zip');
    assert.equal(up.status, 400);
    assert.equal(up.json.code, 'FLINT_ERR_BAD_ARCHIVE');
    assert.match(up.json.message, /'\.\.\/\.\.\/escape\.js'/);
    assert.equal((await call('GET', `/v1/archives/${sha(slip)}`)).status, 404);
    // One already in the store (kept before uploads were checked) is refused when a package names it.
    const kept = await archives.put(Readable.from([slip]));
    const u = await call('POST', `${NS}/packages`, { metadata: { name: 'slip' }, spec: { environment: { name: 'nodejs' }, source: { type: 'url', url: `/v1/archives/${kept.sha256}` } } });
    assert.equal(u.status, 400);
    assert.equal(u.json.field, 'spec.source');
    const missing = await call('POST', `${NS}/packages`, { metadata: { name: 'slip' }, spec: { environment: { name: 'nodejs' }, source: { type: 'url', url: `/v1/archives/${'b'.repeat(64)}` } } });
    assert.equal(missing.status, 400);
    assert.match(missing.json.message, /has not been uploaded/);
    assert.equal((await call('GET', `${NS}/packages/slip`)).status, 404);
  });

  it('rebuild: only a failed package, which goes back to pending', async () => {
    const p = await call('POST', `${NS}/packages/deploy-only/rebuild`);
    assert.equal(p.status, 409);
    assert.match(p.json.message, /not in failed state \(its build status is 'succeeded'\)/);
    const cur = (await call('GET', `${NS}/packages/src-only`)).json;
    await store.updateStatus({ ...cur, status: { buildstatus: 'failed', buildlog: 'boom' } });
    const r = await call('POST', `${NS}/packages/src-only/rebuild`);
    assert.equal(r.status, 200);
    assert.equal(r.json.status.buildstatus, 'pending');
    assert.equal(r.json.status.buildlog, '');
    assert.equal((await call('POST', `${NS}/packages/nope/rebuild`)).status, 404);
  });
});

describe('archive garbage collection', () => {
  it('deletes archives no package refers to once they are past the grace period', async () => {
    const kept = Buffer.from('kept archive');
    const orphan = Buffer.from('orphan archive');
    const k = (await call('POST', '/v1/archives', kept, 'application/octet-stream')).json;
    await call('POST', '/v1/archives', orphan, 'application/octet-stream');
    await call('POST', `${NS}/packages`, { metadata: { name: 'uses-kept' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'url', url: k.url, checksum: k.checksum } } });
    const young = new ArchiveGc({ store, archives, graceMs: 60_000, intervalMs: 60_000 });
    assert.deepEqual(await young.collect(), [], 'nothing is old enough yet');
    const gc = new ArchiveGc({ store, archives, graceMs: 0, intervalMs: 60_000 });
    const deleted = await gc.collect();
    assert.ok(deleted.includes(sha(orphan)));
    assert.ok(!deleted.includes(sha(kept)));
    assert.ok(await archives.get(sha(kept)));
    assert.equal(await archives.get(sha(orphan)), undefined);
    // Once its package is gone, the archive goes too.
    await call('DELETE', `${NS}/packages/uses-kept`);
    assert.ok((await gc.collect()).includes(sha(kept)));
  });
});
