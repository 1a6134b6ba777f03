import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { dataLayout } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import { makeDataDirPrivate, privateDatabaseFiles } from './data-dir.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-datadir-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const modeOf = (p: string) => fs.lstatSync(p).mode & 0o7777;

function loosened(name: string) {
  const root = path.join(tmp, name);
  fs.mkdirSync(root, { mode: 0o755 });
  fs.chmodSync(root, 0o755);
  return dataLayout(root);
}

describe('data directory', () => {
  it('makes a pre-existing 0755 directory 0700 and a new database with its WAL and SHM 0600, whatever the umask', () => {
    const layout = loosened('fresh');
    const old = process.umask(0o022);
    try {
      makeDataDirPrivate(layout, { createDatabase: true });
      const store = openSqliteStore(layout.db);
      try {
        privateDatabaseFiles(layout);
        assert.equal(modeOf(layout.root), 0o700);
        for (const f of [layout.db, `${layout.db}-wal`, `${layout.db}-shm`]) assert.equal(modeOf(f), 0o600, f);
        assert.equal(modeOf(layout.private), 0o700);
      } finally {
        store.close();
      }
    } finally {
      process.umask(old);
    }
  });

  it('tightens a database, its WAL and the private files another start left world-readable', () => {
    const layout = loosened('loose');
    for (const f of [layout.db, `${layout.db}-wal`, `${layout.db}-shm`]) fs.writeFileSync(f, '', { mode: 0o644 });
    fs.mkdirSync(path.join(layout.private, 'nested'), { recursive: true, mode: 0o755 });
    fs.writeFileSync(path.join(layout.private, 'admin-token'), 'x', { mode: 0o644 });
    fs.writeFileSync(path.join(layout.private, 'nested', 'key'), 'x', { mode: 0o666 });
    fs.chmodSync(path.join(layout.private, 'nested', 'key'), 0o666);
    const outside = path.join(tmp, 'outside-file');
    fs.writeFileSync(outside, 'x', { mode: 0o644 });
    fs.chmodSync(outside, 0o644);
    fs.symlinkSync(outside, path.join(layout.private, 'link'));
    makeDataDirPrivate(layout, { createDatabase: true });
    assert.equal(modeOf(layout.root), 0o700);
    for (const f of [layout.db, `${layout.db}-wal`, `${layout.db}-shm`]) assert.equal(modeOf(f), 0o600, f);
    assert.equal(modeOf(layout.private), 0o700);
    assert.equal(modeOf(path.join(layout.private, 'nested')), 0o700);
    assert.equal(modeOf(path.join(layout.private, 'admin-token')), 0o600);
    assert.equal(modeOf(path.join(layout.private, 'nested', 'key')), 0o600);
    // A link under private/ is not followed: its target keeps its mode.
    assert.equal(modeOf(outside), 0o644);
  });

  it('refuses a link in place of the database, which SQLite would follow', () => {
    const layout = loosened('linked-db');
    const target = path.join(tmp, 'elsewhere.db');
    fs.writeFileSync(target, '');
    fs.symlinkSync(target, layout.db);
    assert.throws(
      () => makeDataDirPrivate(layout, { createDatabase: true }),
      (err: Error & { code?: string }) => err.code === 'FLINT_ERR_CONFIG' && /flint\.db is not a regular file \(a symbolic link\)/.test(err.message),
    );
  });

  it('refuses to start in a directory that belongs to another user, and says whose it is', { skip: process.getuid?.() !== 0 && 'needs root to chown' }, () => {
    const layout = loosened('foreign');
    fs.chownSync(layout.root, 65534, 65534);
    assert.throws(
      () => makeDataDirPrivate(layout, { createDatabase: true }),
      (err: Error & { code?: string }) => err.code === 'FLINT_ERR_CONFIG' && /belongs to .*uid 65534.*not to .*who runs the server/.test(err.message),
    );
    // Nothing was made in it.
    assert.deepEqual(fs.readdirSync(layout.root), []);
    assert.equal(modeOf(layout.root), 0o755);
  });
});
