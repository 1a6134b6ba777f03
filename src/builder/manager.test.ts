// The build manager over a real store and archive store, with the real Node
// builder: status transitions, the stored result, failures, a restart in the
// middle of a build, and a package changed while it builds.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { storedArchiveSha } from '../api/build-command.ts';
import type { Package } from '../api/kinds.ts';
import { extractZip, LocalArchiveStore, zipDirectory } from '../archive/index.ts';
import { sandboxAvailable } from '../sandbox/bwrap.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { BuildManager, type BuildManagerOptions } from './manager.ts';

let dir: string;
let store: Store;
let archives: LocalArchiveStore;
let srcLiteral: string;
let opts: BuildManagerOptions;

const eventually = async (what: string, check: () => Promise<boolean>, ms = 30_000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
};

const get = async (name: string) => (await store.get('Package', 'default', name)) as Package;

async function createPkg(name: string, spec: Partial<Package['spec']> = {}, status: Package['status'] = { buildstatus: 'pending', buildlog: '' }) {
  return store.create<Package>({
    apiVersion: 'flint.dev/v1',
    kind: 'Package',
    metadata: { name, namespace: 'default' },
    spec: { environment: { name: 'nodejs', namespace: 'default' }, source: { type: 'literal', literal: srcLiteral }, ...spec },
    status,
  } as Package);
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bm-'));
  store = openSqliteStore(path.join(dir, 'db'));
  archives = new LocalArchiveStore(path.join(dir, 'archives'));
  const src = path.join(dir, 'src');
  fs.mkdirSync(src);
  fs.writeFileSync(path.join(src, 'hello.js'), 'module.exports = async () => ({ body: "built" })\n');
  await zipDirectory(src, path.join(dir, 'src.zip'));
  srcLiteral = fs.readFileSync(path.join(dir, 'src.zip')).toString('base64');
  for (const [name, builder] of [
    ['nodejs', { image: 'flint/node-builder' }],
    ['nobuilder', undefined],
  ] as const) {
    await store.create({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name, namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' }, builder, poolsize: 0 } } as any);
  }
  opts = {
    store,
    archives,
    buildsDir: path.join(dir, 'builds'),
    cacheDir: path.join(dir, 'cache'),
    sandbox: (await sandboxAvailable()) ? 'bubblewrap' : 'none',
    timeoutSeconds: 60,
    memoryMB: 512,
    concurrency: 2,
    maxUnpackedBytes: 64 * 1024 * 1024,
    logger: pino({ level: 'silent' }),
    logFlushMs: 100,
  };
});

after(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('BuildManager', () => {
  it('builds a pending package into a stored deployment archive', async () => {
    const bm = new BuildManager(opts);
    await bm.start();
    try {
      await createPkg('ok');
      await eventually('the build to end', async () => ['succeeded', 'failed'].includes((await get('ok')).status?.buildstatus ?? ''));
      const p = await get('ok');
      assert.equal(p.status?.buildstatus, 'succeeded', p.status?.buildlog);
      assert.match(p.status?.buildlog ?? '', /^\+ build\nno package\.json: nothing to install\n/);
      const sha = storedArchiveSha(p.spec.deployment?.url ?? '');
      assert.ok(sha, JSON.stringify(p.spec.deployment));
      assert.equal(p.spec.deployment?.checksum?.sum, sha);
      const out = path.join(dir, 'out-ok');
      await extractZip(await archives.pathOf(sha), out);
      assert.equal(fs.readFileSync(path.join(out, 'hello.js'), 'utf8'), 'module.exports = async () => ({ body: "built" })\n');
      assert.deepEqual(fs.readdirSync(opts.buildsDir), [], 'the work directory is gone');
    } finally {
      await bm.stop();
    }
  });

  it('records a failed build with its output and the reason', async () => {
    const bm = new BuildManager(opts);
    await bm.start();
    try {
      await createPkg('fails', { buildcmd: 'false' });
      await createPkg('no-builder', { environment: { name: 'nobuilder', namespace: 'default' } });
      await createPkg('no-env', { environment: { name: 'missing', namespace: 'default' } });
      await eventually('three failures', async () => {
        const s = await Promise.all(['fails', 'no-builder', 'no-env'].map(async (n) => (await get(n)).status?.buildstatus));
        return s.every((x) => x === 'failed' || x === 'succeeded');
      });
      assert.match((await get('fails')).status?.buildlog ?? '', /error building source package: the build command 'false' exited with code 1\n$/);
      const nb = await get('no-builder');
      assert.equal(nb.status?.buildstatus, 'failed');
      assert.match(nb.status?.buildlog ?? '', /error building source package: environment 'nobuilder' has no builder: create it with --builder flint\/node-builder/);
      assert.match((await get('no-env')).status?.buildlog ?? '', /environment 'missing' not found/);
      assert.equal((await get('no-env')).spec.deployment, undefined, 'a failed build stores nothing');
    } finally {
      await bm.stop();
    }
  });

  it('fails a build that hangs past the time limit', async () => {
    const bm = new BuildManager({ ...opts, timeoutSeconds: 1 });
    await bm.start();
    try {
      await createPkg('hangs', { buildcmd: 'sleep 600' });
      await eventually('the hanging build to fail', async () => (await get('hangs')).status?.buildstatus === 'failed', 20_000);
      assert.match((await get('hangs')).status?.buildlog ?? '', /the build did not finish within 1 s and was stopped/);
    } finally {
      await bm.stop();
    }
  });

  it('builds again a package left running by a restart', async () => {
    await createPkg('interrupted', {}, { buildstatus: 'running', buildlog: 'half a log' });
    const bm = new BuildManager(opts);
    await bm.start();
    try {
      await eventually('the interrupted build to be redone', async () => (await get('interrupted')).status?.buildstatus === 'succeeded');
      assert.doesNotMatch((await get('interrupted')).status?.buildlog ?? '', /half a log/);
    } finally {
      await bm.stop();
    }
  });

  it('drops the result of a build whose package changed meanwhile, and builds the new source', async () => {
    const bm = new BuildManager(opts);
    await bm.start();
    try {
      // The first build sleeps long enough for the change to land during it.
      await createPkg('changing', { buildcmd: 'sleep 3' });
      await eventually('the build to start', async () => (await get('changing')).status?.buildstatus === 'running');
      const cur = await get('changing');
      await store.update({ ...cur, spec: { ...cur.spec, buildcmd: 'build' }, status: { buildstatus: 'pending', buildlog: '' } });
      await eventually('the new build to succeed', async () => (await get('changing')).status?.buildstatus === 'succeeded');
      assert.match((await get('changing')).status?.buildlog ?? '', /^\+ build\n/);
    } finally {
      await bm.stop();
    }
  });
});
