// Zips in and out: round trips, and every kind of unsafe archive refused
// with nothing left behind.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import yazl from 'yazl';
import { rawZip } from './testing.ts';
import { isZipFile, zipDirectory, zipFiles } from './zip-create.ts';
import { extractZip } from './zip-extract.ts';
import { inspectZip } from './zip-inspect.ts';

let dir: string;
let n = 0;
const file = (name: string, bytes: Buffer) => {
  const p = path.join(dir, name);
  fs.writeFileSync(p, bytes);
  return p;
};
const fresh = () => path.join(dir, `out-${++n}`);

function yazlZip(add: (z: yazl.ZipFile) => void): Promise<string> {
  const z = new yazl.ZipFile();
  add(z);
  const out = path.join(dir, `y-${++n}.zip`);
  return new Promise((resolve, reject) => {
    z.outputStream.pipe(fs.createWriteStream(out)).on('close', () => resolve(out)).on('error', reject);
    z.end();
  });
}

async function refused(zip: string, code: string, re: RegExp, limits = {}) {
  const dest = fresh();
  await assert.rejects(extractZip(zip, dest, limits), (e: any) => {
    assert.equal(e.code, code, e.message);
    assert.match(e.message, re);
    return true;
  });
  assert.equal(fs.existsSync(dest), false, 'nothing left at the destination');
  assert.deepEqual(
    fs.readdirSync(dir).filter((f) => f.includes('.part-')),
    [],
    'no temporary directory left',
  );
}

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-zip-'));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('zip round trip', () => {
  it('keeps content, executable bits and in-tree symlinks, and is deterministic', async () => {
    const src = path.join(dir, 'tree');
    fs.mkdirSync(path.join(src, 'node_modules', 'pkg', 'bin'), { recursive: true });
    fs.mkdirSync(path.join(src, 'node_modules', '.bin'), { recursive: true });
    fs.writeFileSync(path.join(src, 'index.js'), 'hello');
    fs.writeFileSync(path.join(src, 'node_modules', 'pkg', 'bin', 'cli'), '#!/bin/sh\n', { mode: 0o755 });
    fs.symlinkSync('../pkg/bin/cli', path.join(src, 'node_modules', '.bin', 'cli'));
    fs.mkdirSync(path.join(src, 'empty'));
    const a = await zipDirectory(src, path.join(dir, 'a.zip'));
    const b = await zipDirectory(src, path.join(dir, 'b.zip'));
    assert.equal(a.sha256, b.sha256, 'the same tree zips to the same bytes');
    assert.ok(await isZipFile(path.join(dir, 'a.zip')));
    const out = fresh();
    const r = await extractZip(path.join(dir, 'a.zip'), out);
    assert.equal(r.bytes, 'hello'.length + '#!/bin/sh\n'.length);
    assert.equal(fs.readFileSync(path.join(out, 'index.js'), 'utf8'), 'hello');
    assert.equal(fs.statSync(path.join(out, 'node_modules', 'pkg', 'bin', 'cli')).mode & 0o777, 0o755);
    assert.equal(fs.statSync(path.join(out, 'index.js')).mode & 0o777, 0o644);
    assert.equal(fs.readlinkSync(path.join(out, 'node_modules', '.bin', 'cli')), '../pkg/bin/cli');
    assert.ok(fs.statSync(path.join(out, 'empty')).isDirectory());
  });

  it('zips a list of files under their names, and refuses to zip a symlink leaving the tree', async () => {
    const f = file('one.txt', Buffer.from('1'));
    await zipFiles([{ path: f, name: 'renamed.txt' }], path.join(dir, 'files.zip'));
    const out = fresh();
    await extractZip(path.join(dir, 'files.zip'), out);
    assert.deepEqual(fs.readdirSync(out), ['renamed.txt']);
    const src = path.join(dir, 'leaky');
    fs.mkdirSync(src);
    fs.symlinkSync('/etc/passwd', path.join(src, 'passwd'));
    await assert.rejects(zipDirectory(src, path.join(dir, 'leaky.zip')), { code: 'FLINT_ERR_BAD_ARCHIVE' });
  });

  it('unpacks into an existing empty directory', async () => {
    const out = fresh();
    fs.mkdirSync(out);
    await extractZip(await yazlZip((z) => z.addBuffer(Buffer.from('x'), 'a.txt')), out);
    assert.deepEqual(fs.readdirSync(out), ['a.txt']);
  });
});

describe('unsafe archives', () => {
  for (const [name, entry] of [
    ['zip-slip', '../evil'],
    ['nested zip-slip', 'a/../../evil'],
    ['absolute path', '/etc/evil'],
    ['backslash', '..\\evil'],
    ['drive letter', 'C:/evil'],
  ] as const) {
    it(`refuses ${name} (${entry})`, async () => {
      const zip = file(`${name.replace(/ /g, '-')}.zip`, rawZip(entry, Buffer.from('x')));
      await refused(zip, 'FLINT_ERR_BAD_ARCHIVE', new RegExp(entry.replace(/[.^$|?*+()[\]{}\\]/g, '\\$&')));
      await assert.rejects(inspectZip(zip, { maxEntries: 10, maxBytes: 1e6 }), { code: 'FLINT_ERR_BAD_ARCHIVE' });
    });
  }

  it('refuses symlinks leaving the tree, absolute or relative', async () => {
    await refused(file('abs-link.zip', rawZip('passwd', Buffer.from('/etc/passwd'), { symlink: true })), 'FLINT_ERR_BAD_ARCHIVE', /symlink 'passwd' points to the absolute path/);
    await refused(file('rel-link.zip', rawZip('a/up', Buffer.from('../../x'), { symlink: true })), 'FLINT_ERR_BAD_ARCHIVE', /symlink 'a\/up' points to '\.\.\/\.\.\/x', outside the archive/);
    assert.equal(fs.existsSync(path.join(dir, 'x')), false);
  });

  it('never writes a file through a symlink', async () => {
    // "sub" is a link to a directory in the tree, and "sub/f" a file beneath it.
    const zip = await yazlZip((z) => {
      z.addBuffer(Buffer.from('sub'), 'sub', { mode: 0o120777 });
      z.addBuffer(Buffer.from('payload'), 'sub/f');
    });
    await refused(zip, 'FLINT_ERR_BAD_ARCHIVE', /entry 'sub\/f' passes through the symlink 'sub'/);
  });

  it('stops a zip bomb at the unpacked cap, whatever the entry declares', async () => {
    const zip = await yazlZip((z) => z.addBuffer(Buffer.alloc(50 * 1024 * 1024), 'zeros.bin'));
    assert.ok(fs.statSync(zip).size < 1024 * 1024, 'highly compressed');
    await refused(zip, 'FLINT_ERR_PAYLOAD_TOO_LARGE', /more than 10485760 bytes/, { maxBytes: 10 * 1024 * 1024 });
    await assert.rejects(inspectZip(zip, { maxEntries: 10, maxBytes: 10 * 1024 * 1024 }), { code: 'FLINT_ERR_PAYLOAD_TOO_LARGE' });
  });

  it('refuses too many entries', async () => {
    const zip = await yazlZip((z) => {
      for (let i = 0; i < 20; i++) z.addBuffer(Buffer.from('x'), `f${i}`);
    });
    await refused(zip, 'FLINT_ERR_PAYLOAD_TOO_LARGE', /more than 10 entries/, { maxEntries: 10 });
  });

  it('refuses a file that is not a zip, a truncated zip and duplicate names', async () => {
    await refused(file('text.zip', Buffer.from('just some text, not a zip\n')), 'FLINT_ERR_BAD_ARCHIVE', /not a zip archive/);
    const whole = fs.readFileSync(await yazlZip((z) => z.addBuffer(Buffer.from('content'), 'a.txt')));
    await refused(file('truncated.zip', whole.subarray(0, whole.length - 10)), 'FLINT_ERR_BAD_ARCHIVE', /zip/);
    const dup = await yazlZip((z) => {
      z.addBuffer(Buffer.from('1'), 'same.txt');
      z.addBuffer(Buffer.from('2'), 'same.txt');
    });
    await refused(dup, 'FLINT_ERR_BAD_ARCHIVE', /entry 'same\.txt' appears twice/);
  });
});
