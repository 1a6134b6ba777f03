// A build's output is user content: links in it that leave the tree through
// other links, and a DEPLOY_PKG that is itself a link, are refused and
// nothing outside is stored.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { extractZip, LocalArchiveStore } from '../archive/index.ts';
import { storeBuildOutput } from './output.ts';

let dir: string;
let archives: LocalArchiveStore;
let n = 0;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-build-output-'));
  archives = new LocalArchiveStore(path.join(dir, 'archives'));
  fs.writeFileSync(path.join(dir, 'secret'), 'host secret');
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

function work(): string {
  const w = path.join(dir, `work-${++n}`);
  fs.mkdirSync(w);
  return w;
}

const stored = async () => {
  const all: string[] = [];
  for await (const a of archives.list()) all.push(a.sha256);
  return all;
};

describe('build output', () => {
  it('zips a directory with in-tree links', async () => {
    const w = work();
    const deploy = path.join(w, 'deploy');
    fs.mkdirSync(path.join(deploy, 'lib'), { recursive: true });
    fs.writeFileSync(path.join(deploy, 'lib', 'index.js'), 'x');
    fs.symlinkSync('lib/index.js', path.join(deploy, 'main.js'));
    const info = await storeBuildOutput(archives, deploy, w, false);
    const out = path.join(w, 'out');
    await extractZip(await archives.pathOf(info.sha256), out);
    assert.equal(fs.readFileSync(path.join(out, 'main.js'), 'utf8'), 'x');
  });

  it('refuses a link that leaves the tree through another link, storing nothing', async () => {
    const before = await stored();
    const w = work();
    const deploy = path.join(w, 'deploy');
    fs.mkdirSync(path.join(deploy, 's'), { recursive: true });
    // By its letters s/x -> d/../.. is the root; with s/d -> . it is the root's parent.
    fs.symlinkSync('.', path.join(deploy, 's', 'd'));
    fs.symlinkSync('d/../..', path.join(deploy, 's', 'x'));
    await assert.rejects(storeBuildOutput(archives, deploy, w, false), (e: any) => e.code === 'FLINT_ERR_BAD_ARCHIVE' && /symlink 's\/x' points to 'd\/\.\.\/\.\.', outside the archive/.test(e.message));
    assert.deepEqual(await stored(), before);
  });

  it('refuses to write its zip through a link the build left at deploy.zip in its work directory', async () => {
    const before = await stored();
    const w = work();
    const deploy = path.join(w, 'deploy');
    fs.mkdirSync(deploy);
    fs.writeFileSync(path.join(deploy, 'index.js'), 'x');
    fs.symlinkSync(path.join(dir, 'secret'), path.join(w, 'deploy.zip'));
    await assert.rejects(storeBuildOutput(archives, deploy, w, false), (e: any) => e.code === 'FLINT_ERR_UNSAFE_PATH' && /deploy\.zip: it is a symbolic link/.test(e.message));
    assert.equal(fs.readFileSync(path.join(dir, 'secret'), 'utf8'), 'host secret');
    assert.deepEqual(await stored(), before);
  });

  it('refuses a DEPLOY_PKG that is a link, for a kept archive as for a zipped one', async () => {
    const before = await stored();
    for (const keep of [true, false]) {
      const w = work();
      fs.symlinkSync(path.join(dir, 'secret'), path.join(w, 'deploy'));
      await assert.rejects(storeBuildOutput(archives, path.join(w, 'deploy'), w, keep), /neither a file nor a directory/);
    }
    assert.deepEqual(await stored(), before);
  });
});
