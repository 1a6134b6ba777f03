import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { listenerCaps, openFileLimit } from './fd-budget.ts';

describe('fd budget', () => {
  it('reads the soft open-file limit, and falls back to 1024 where it cannot', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-limits-'));
    try {
      const f = path.join(dir, 'limits');
      fs.writeFileSync(f, 'Limit                     Soft Limit           Hard Limit           Units     \nMax open files            20000                524288               files     \n');
      assert.equal(openFileLimit(f), 20000);
      fs.writeFileSync(f, 'Max open files            unlimited            unlimited            files     \n');
      assert.equal(openFileLimit(f), 1 << 20);
      assert.equal(openFileLimit(path.join(dir, 'missing')), 1024);
      assert.ok(openFileLimit() > 0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives each listener its share of the limit, a client half of that, and keeps what the values set', () => {
    assert.deepEqual(listenerCaps('router', { maxConnections: 0, maxConnectionsPerClient: 0 }, 20000), { maxConnections: 10000, maxConnectionsPerClient: 5000 });
    assert.deepEqual(listenerCaps('controller', { maxConnections: 0, maxConnectionsPerClient: 0 }, 20000), { maxConnections: 1000, maxConnectionsPerClient: 500 });
    assert.deepEqual(listenerCaps('router', { maxConnections: 300, maxConnectionsPerClient: 7 }, 20000), { maxConnections: 300, maxConnectionsPerClient: 7 });
    // The shares together leave a quarter of the limit for everything else.
    const sum = ['router', 'ingress', 'ingress', 'controller'].reduce((n, l) => n + listenerCaps(l as 'router', { maxConnections: 0, maxConnectionsPerClient: 0 }, 20000).maxConnections, 0);
    assert.ok(sum <= 15000, String(sum));
    assert.equal(listenerCaps('controller', { maxConnections: 0, maxConnectionsPerClient: 0 }, 100).maxConnections, 64, 'a floor for tiny limits');
  });
});
