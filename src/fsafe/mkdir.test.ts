// mkdir -p below a root: a link or a foreign file anywhere below the root is
// refused, and nothing is made through it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { mkdirUnder } from './mkdir.ts';

let dir: string;
let root: string;
let outside: string;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-fsafe-mkdir-'));
  root = path.join(dir, 'root');
  outside = path.join(dir, 'outside');
  fs.mkdirSync(outside);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const unsafe = (re: RegExp) => (e: any) => e.code === 'FLINT_ERR_UNSAFE_PATH' && re.test(e.message);

describe('mkdirUnder', () => {
  it('makes the root and every directory below it, and accepts them again', () => {
    assert.equal(mkdirUnder(root, 'a/b/c'), path.join(root, 'a', 'b', 'c'));
    assert.ok(fs.lstatSync(path.join(root, 'a', 'b', 'c')).isDirectory());
    assert.equal(mkdirUnder(root, 'a/b'), path.join(root, 'a', 'b'));
  });

  it('refuses a link at any component, making nothing through it', () => {
    fs.symlinkSync(outside, path.join(root, 'last'));
    assert.throws(() => mkdirUnder(root, 'last'), unsafe(/symbolic link/));
    fs.mkdirSync(path.join(root, 'mid'));
    fs.symlinkSync(outside, path.join(root, 'mid', 'link'));
    assert.throws(() => mkdirUnder(root, 'mid/link/deeper/still'), unsafe(/symbolic link/));
    assert.deepEqual(fs.readdirSync(outside), []);
  });

  it('refuses a file where a directory should be', () => {
    fs.writeFileSync(path.join(root, 'file'), '');
    assert.throws(() => mkdirUnder(root, 'file/x'), unsafe(/not a directory/));
  });

  it('refuses a path leaving the root', () => {
    assert.throws(() => mkdirUnder(root, '../escape'), unsafe(/leaves its root/));
    assert.throws(() => mkdirUnder(root, '/etc/x'), unsafe(/leaves its root/));
    assert.equal(fs.existsSync(path.join(dir, 'escape')), false);
  });
});
