// The deploy cache where something planted links: in place of an archive's
// unpacked tree, of the spares directory, or of an instance's code
// directory. Each fails or is passed over, and nothing lands where the link
// points.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sha256File } from '../archive/checksum.ts';
import { rawZipOf } from '../archive/testing.ts';
import { DeployCache } from './deploy-cache.ts';

let dir: string;
let outside: string;
let zip: string;
let sha: string;
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-deploy-cache-'));
  outside = path.join(dir, 'outside');
  fs.mkdirSync(outside);
  zip = path.join(dir, 'code.zip');
  fs.writeFileSync(zip, rawZipOf([{ name: 'index.js', data: Buffer.from('module.exports = 1;') }]));
  sha = await sha256File(zip);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('deploy cache', () => {
  it('checks out code as hard links of one unpacked tree', async () => {
    const cache = new DeployCache(path.join(dir, 'plain'), 1e6);
    const dest = path.join(dir, 'instance-plain');
    fs.mkdirSync(dest);
    await cache.checkout(sha, zip, path.join(dest, 'deployarchive'));
    assert.equal(fs.readFileSync(path.join(dest, 'deployarchive', 'index.js'), 'utf8'), 'module.exports = 1;');
  });

  it("refuses to unpack when a link stands in place of the archive's tree", async () => {
    const cacheDir = path.join(dir, 'tree-link');
    const cache = new DeployCache(cacheDir, 1e6);
    fs.symlinkSync(outside, path.join(cacheDir, sha));
    await assert.rejects(cache.unpacked(sha, zip), (e: any) => e.code === 'FLINT_ERR_UNSAFE_PATH' && /symbolic link/.test(e.message));
    assert.deepEqual(fs.readdirSync(outside), []);
  });

  it('makes no spare through a link in place of the spares directory, and still checks out', async () => {
    const cacheDir = path.join(dir, 'spares-link');
    const cache = new DeployCache(cacheDir, 1e6);
    fs.symlinkSync(outside, path.join(cacheDir, 'spares'));
    await cache.warm(sha, zip);
    const dest = path.join(dir, 'instance-spares');
    fs.mkdirSync(dest);
    await cache.checkout(sha, zip, path.join(dest, 'deployarchive'));
    assert.equal(fs.readFileSync(path.join(dest, 'deployarchive', 'index.js'), 'utf8'), 'module.exports = 1;');
    // A checkout starts the next spare in the background; the next checkout waits for it, wherever it went.
    const again = path.join(dir, 'instance-spares-2');
    fs.mkdirSync(again);
    await cache.checkout(sha, zip, path.join(again, 'deployarchive'));
    assert.equal(fs.readFileSync(path.join(again, 'deployarchive', 'index.js'), 'utf8'), 'module.exports = 1;');
    assert.deepEqual(fs.readdirSync(outside), []);
  });

  it("fails a checkout when a link stands in place of the instance's code directory", async () => {
    const cache = new DeployCache(path.join(dir, 'dest-link'), 1e6);
    const dest = path.join(dir, 'instance-link');
    fs.mkdirSync(dest);
    fs.symlinkSync(outside, path.join(dest, 'deployarchive'));
    await assert.rejects(cache.checkout(sha, zip, path.join(dest, 'deployarchive')), /EEXIST/);
    assert.deepEqual(fs.readdirSync(outside), []);
  });
});
