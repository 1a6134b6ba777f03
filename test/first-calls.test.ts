// The warm pool grows ahead of new functions' first calls (docs/executor.md,
// "Bursts of cold starts"), through the real server, CLI and sandboxed
// workers: functions created while the server runs each hold a warm worker
// until they are called; functions found at a restart do not.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer | undefined;
let work: string;
let dataDir: string;

function ok(args: string[]): string {
  const r = flint(server!, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

async function warmWorkers(env: string): Promise<number | undefined> {
  const text = await (await fetch(`${server!.controllerUrl}/metrics`)).text();
  const m = new RegExp(`^flint_executor_warm_workers\\{environment="default/${env}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('pool growth ahead of first calls', { timeout: 180_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-first-calls-'));
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-first-calls-data-'));
    server = await startServer({ dataDir });
    fs.writeFileSync(path.join(work, 'hello.js'), 'module.exports = async () => ({ body: "hello\\n" });');
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    // Another environment that asks for no pool: it grows ahead for nothing.
    ok(['env', 'create', '--name', 'nopool', '--image', 'flint/node-env', '--poolsize', '0']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('holds a warm worker for each new function until it is called', async () => {
    await eventually(async () => (await warmWorkers('nodejs')) === 1, 'the pool of 1', 30_000, 100);
    for (const name of ['a', 'b', 'c']) ok(['fn', 'create', '--name', name, '--env', 'nodejs', '--code', 'hello.js']);
    ok(['fn', 'create', '--name', 'z', '--env', 'nopool', '--code', 'hello.js']);
    await eventually(async () => (await warmWorkers('nodejs')) === 4, 'the pool to grow to 1 + 3 before any call', 30_000, 100);
    await settle(1500);
    assert.equal(await warmWorkers('nodejs'), 4);
    assert.equal(await warmWorkers('nopool'), 0);
    // Called one at a time, more than a second apart (no burst to remember): each takes one and the pool shrinks back.
    for (const name of ['a', 'b', 'c']) {
      const res = await fetch(`${server!.routerUrl}/flint-function/${name}`);
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'hello\n');
      await settle(1200);
    }
    await eventually(async () => (await warmWorkers('nodejs')) === 1, 'the pool back to its size once all three were called', 30_000, 100);
  });

  it('counts a function once however often its code changes before its first call, until it is deleted; none found at a restart', async () => {
    fs.writeFileSync(path.join(work, 'hello2.js'), 'module.exports = async () => ({ body: "hello again\\n" });');
    ok(['fn', 'create', '--name', 'd', '--env', 'nodejs', '--code', 'hello.js']);
    await eventually(async () => (await warmWorkers('nodejs')) === 2, 'one more warm worker for a new function', 30_000, 100);
    ok(['fn', 'update', '--name', 'd', '--code', 'hello2.js']);
    await settle(1500);
    assert.equal(await warmWorkers('nodejs'), 2, 'still one for its first call, of whichever code');
    // A deleted function no longer counts (its extra worker stops when the reaper next runs, every second here).
    ok(['fn', 'delete', '--name', 'd']);
    await eventually(async () => (await warmWorkers('nodejs')) === 1, 'the deleted function to stop counting', 30_000, 100);

    await server!.stop();
    server = await startServer({ dataDir });
    await eventually(async () => (await warmWorkers('nodejs')) === 1, 'the pool of 1 after the restart', 30_000, 100);
    await settle(2000);
    assert.equal(await warmWorkers('nodejs'), 1, 'functions found at start are not counted');
    const res = await fetch(`${server.routerUrl}/flint-function/a`);
    assert.equal(await res.text(), 'hello\n');
  });
});
