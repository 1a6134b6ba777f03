import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { openSqliteStore } from './sqlite.ts';
import { env, runStoreContract } from './store.contract.ts';

let dir = '';
runStoreContract('sqlite', {
  async open() {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-store-'));
    return openSqliteStore(path.join(dir, 'flint.db'));
  },
  async cleanup() {
    fs.rmSync(dir, { recursive: true, force: true });
  },
});

describe('sqlite store durability', () => {
  it('keeps objects, uid and resourceVersion across a reopen', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-store-'));
    try {
      const file = path.join(d, 'flint.db');
      const s1 = openSqliteStore(file);
      const a = await s1.create(env('a'));
      await s1.close();
      const s2 = openSqliteStore(file);
      assert.deepEqual(await s2.get('Environment', 'default', 'a'), a);
      const b = await s2.create(env('b'));
      assert.ok(Number(b.metadata.resourceVersion) > Number(a.metadata.resourceVersion), 'resourceVersion keeps growing');
      await s2.close();
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  it('loses no committed write when the process is killed with SIGKILL', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-store-'));
    try {
      const file = path.join(d, 'flint.db');
      const script = `
        import { openSqliteStore } from ${JSON.stringify(path.resolve('src/store/sqlite.ts'))};
        const s = openSqliteStore(${JSON.stringify(file)});
        for (let i = 0; ; i++) {
          await s.create({ kind: 'ConfigMap', apiVersion: 'flint.dev/v1', metadata: { name: 'c' + i, namespace: 'default' }, data: { i: String(i) } });
          process.stdout.write(i + '\\n');
        }`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
      let acked = -1;
      await new Promise<void>((resolve) => {
        child.stdout.on('data', (chunk: Buffer) => {
          const lines = chunk.toString().trim().split('\n');
          acked = Number(lines[lines.length - 1]);
          if (acked >= 50) {
            child.kill('SIGKILL');
            resolve();
          }
        });
      });
      await new Promise((r) => child.once('exit', r));
      const s = openSqliteStore(file);
      const { items } = await s.list('ConfigMap');
      assert.ok(items.length >= acked + 1, `every acknowledged write survives (acked ${acked + 1}, found ${items.length})`);
      await s.close();
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  it('refuses a watch from a version older than the kept history', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-store-'));
    try {
      const s = openSqliteStore(path.join(d, 'flint.db'), { eventRetention: 10 });
      for (let i = 0; i < 120; i++) await s.create(env(`e${i}`));
      assert.throws(() => s.watch({ sinceResourceVersion: '1' }, () => {}), { code: 'FLINT_ERR_GONE' });
      await s.close();
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });
});
