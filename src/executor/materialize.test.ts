// An instance's code, secrets and configmaps where something planted links
// in the instance's directories: each is refused and nothing is written
// where the link points; a clean instance gets its files.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { FunctionResource, Package } from '../api/kinds.ts';
import { LocalArchiveStore } from '../archive/index.ts';
import { dataLayout } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { DeployCache } from './deploy-cache.ts';
import { type CodeSource, materialize } from './materialize.ts';
import type { WorkerHandle } from './process/worker-process.ts';

let root: string;
let outside: string;
let store: Store;
let src: CodeSource;
let n = 0;

const fn = {
  apiVersion: 'flint.dev/v1',
  kind: 'Function',
  metadata: { name: 'f', namespace: 'default' },
  spec: { environment: { name: 'node' }, package: { packageref: { name: 'p' } }, secrets: [{ name: 's' }], configmaps: [{ name: 'c' }] },
} as unknown as FunctionResource;
const pkg = {
  apiVersion: 'flint.dev/v1',
  kind: 'Package',
  metadata: { name: 'p', namespace: 'default' },
  spec: { environment: { name: 'node' }, deployment: { type: 'literal', literal: Buffer.from('module.exports = 1;').toString('base64') } },
} as unknown as Package;

/** An instance's directories as a worker makes them; materialize reads nothing else of its worker. */
function instance(): { worker: WorkerHandle; dirs: { userfunc: string; secrets: string; configs: string } } {
  const base = path.join(root, 'instances', `w${++n}`);
  const dirs = { userfunc: path.join(base, 'userfunc'), secrets: path.join(base, 'secrets'), configs: path.join(base, 'configs') };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  return { worker: { hostDirs: dirs, sandboxDirs: dirs } as unknown as WorkerHandle, dirs };
}

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-materialize-'));
  outside = path.join(root, 'outside');
  const layout = dataLayout(path.join(root, 'data'));
  fs.mkdirSync(layout.root, { recursive: true });
  store = openSqliteStore(layout.db);
  await store.create({ apiVersion: 'flint.dev/v1', kind: 'Secret', metadata: { name: 's', namespace: 'default' }, data: { password: 'hunter2' } } as any);
  await store.create({ apiVersion: 'flint.dev/v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'default' }, data: { mode: 'fast' } } as any);
  src = { store, archives: new LocalArchiveStore(layout.archives), deployCache: new DeployCache(layout.deployCache, 1e6) };
});
beforeEach(() => {
  fs.rmSync(outside, { recursive: true, force: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'victim'), 'precious');
});
after(async () => {
  await store.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const untouched = () => {
  assert.deepEqual(fs.readdirSync(outside), ['victim']);
  assert.equal(fs.readFileSync(path.join(outside, 'victim'), 'utf8'), 'precious');
};
const unsafe = (e: any) => e.code === 'FLINT_ERR_UNSAFE_PATH' && /symbolic link/.test(e.message);

describe('materialize', () => {
  it('writes code, secrets and configmaps into a clean instance', async () => {
    const { worker, dirs } = instance();
    await materialize(src, fn, pkg, false, worker);
    assert.equal(fs.readFileSync(path.join(dirs.userfunc, 'deployarchive'), 'utf8'), 'module.exports = 1;');
    assert.equal(fs.readFileSync(path.join(dirs.secrets, 'default', 's', 'password'), 'utf8'), 'hunter2');
    assert.equal(fs.readFileSync(path.join(dirs.configs, 'default', 'c', 'mode'), 'utf8'), 'fast');
  });

  it('refuses a link in place of the code file', async () => {
    const { worker, dirs } = instance();
    fs.symlinkSync(path.join(outside, 'victim'), path.join(dirs.userfunc, 'deployarchive'));
    await assert.rejects(materialize(src, fn, pkg, false, worker), unsafe);
    untouched();
  });

  it("refuses a link in place of a secret's namespace directory", async () => {
    const { worker, dirs } = instance();
    fs.symlinkSync(outside, path.join(dirs.secrets, 'default'));
    await assert.rejects(materialize(src, fn, pkg, false, worker), unsafe);
    untouched();
  });

  it("refuses a link in place of a secret's key file", async () => {
    const { worker, dirs } = instance();
    fs.mkdirSync(path.join(dirs.secrets, 'default', 's'), { recursive: true });
    fs.symlinkSync(path.join(outside, 'victim'), path.join(dirs.secrets, 'default', 's', 'password'));
    await assert.rejects(materialize(src, fn, pkg, false, worker), unsafe);
    untouched();
  });

  it("refuses a link in place of a configmap's directory", async () => {
    const { worker, dirs } = instance();
    fs.mkdirSync(path.join(dirs.configs, 'default'));
    fs.symlinkSync(outside, path.join(dirs.configs, 'default', 'c'));
    await assert.rejects(materialize(src, fn, pkg, false, worker), unsafe);
    untouched();
  });
});
