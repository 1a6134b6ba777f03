// The data directory on a full filesystem (a small tmpfs the test mounts):
// writes are refused with a clear error, reads go on, functions keep
// answering, and once there is room again everything works and nothing was
// corrupted or half-written, across a restart too.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startServer, type TestServer } from './helpers/server.ts';

const root = process.getuid?.() === 0;
let mnt: string;
let server: TestServer | undefined;

async function api(method: string, p: string, body?: unknown) {
  const res = await fetch(`${server!.controllerUrl}${p}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** Fills the filesystem of `dir` to the last byte. */
function fill(dir: string): string {
  const filler = path.join(dir, 'filler');
  const fd = fs.openSync(filler, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
  // What is left is smaller than a chunk: take it too.
  try {
    for (;;) fs.writeSync(fd, Buffer.alloc(512, 1));
  } catch {}
  fs.closeSync(fd);
  return filler;
}

describe('a full data directory', { skip: !root && 'mounting a tmpfs needs root', timeout: 120_000 }, () => {
  before(() => {
    mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-full-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mnt]);
  });
  after(async () => {
    await server?.stop();
    try {
      execFileSync('umount', ['-l', mnt]);
    } catch {}
    fs.rmSync(mnt, { recursive: true, force: true });
  });

  it('refuses writes with 507 naming the data directory, keeps serving reads and calls, and loses nothing', async () => {
    const dataDir = path.join(mnt, 'data');
    server = await startServer({ dataDir, sets: ['executor.poolSize=1'] });
    const literal = Buffer.from('module.exports = async () => { console.log("called"); return { status: 200, body: "still here\\n" }; };').toString('base64');
    assert.equal((await api('POST', '/v1/namespaces/default/environments', { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 1 } })).status, 201);
    assert.equal((await api('POST', '/v1/namespaces/default/packages', { metadata: { name: 'p' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal } } })).status, 201);
    assert.equal((await api('POST', '/v1/namespaces/default/functions', { metadata: { name: 'f' }, spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'p' } } } })).status, 201);
    const call = () => fetch(`${server!.routerUrl}/flint-function/f`).then(async (r) => ({ status: r.status, text: await r.text() }));
    assert.deepEqual(await call(), { status: 200, text: 'still here\n' });
    const before = (await api('GET', '/v1/configmaps')).json;

    const filler = fill(mnt);
    const refused = await api('POST', '/v1/namespaces/default/configmaps', { metadata: { name: 'big' }, data: { k: 'x'.repeat(200_000) } });
    assert.equal(refused.status, 507, JSON.stringify(refused.json));
    assert.equal(refused.json.code, 'FLINT_ERR_STORAGE_FULL');
    assert.match(refused.json.message, /no space left .*data directory/);
    const upload = await fetch(`${server.controllerUrl}/v1/archives`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: Buffer.alloc(300_000, 7) });
    assert.equal(upload.status, 507, await upload.clone().text());
    // Reads and calls go on; the function's log line just has nowhere to go.
    assert.deepEqual((await api('GET', '/v1/configmaps')).json, before);
    assert.equal((await api('GET', '/v1/namespaces/default/functions/f')).status, 200);
    assert.deepEqual(await call(), { status: 200, text: 'still here\n' });
    assert.equal(server.child.exitCode, null, 'the server is still running');

    fs.rmSync(filler);
    assert.equal((await api('POST', '/v1/namespaces/default/configmaps', { metadata: { name: 'small' }, data: { k: 'v' } })).status, 201);
    assert.equal((await api('GET', '/v1/namespaces/default/configmaps/big')).status, 404, 'nothing of the refused write was kept');
    await server.stop();
    server = await startServer({ dataDir, sets: ['executor.poolSize=1'] });
    assert.equal((await api('GET', '/v1/namespaces/default/configmaps/small')).status, 200);
    assert.equal((await api('GET', '/v1/namespaces/default/configmaps/big')).status, 404);
    assert.deepEqual(await call(), { status: 200, text: 'still here\n' });
  });
});
