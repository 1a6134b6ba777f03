// The instance budget through the real server: with every instance it allows
// busy, a call to another function gets 503 with Retry-After naming the
// limit; once they are idle, the same call stops one of them and succeeds.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

function ok(args: string[]): void {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')}:\n${r.stderr}`);
}

describe('instance budget', { timeout: 120_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-budget-sys-'));
    server = await startServer({ sets: ['executor.maxInstances=2', 'executor.poolSize=0', 'executor.queueTimeoutSeconds=1'] });
    fs.writeFileSync(path.join(work, 'slow.js'), 'module.exports = async (ctx) => { await new Promise((r) => setTimeout(r, Number(ctx.request.query.ms))); return { body: "slept\\n" }; };');
    fs.writeFileSync(path.join(work, 'hello.js'), 'module.exports = async () => ({ body: "hello\\n" });');
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '0']);
    ok(['fn', 'create', '--name', 'slow', '--env', 'nodejs', '--code', 'slow.js']);
    ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('answers 503 with Retry-After when the budget is spent, then reclaims an idle instance', async () => {
    const call = (p: string) => fetch(`${server.routerUrl}/flint-function/${p}`);
    // Both instances the budget allows, busy for a while.
    const busy = [call('slow?ms=4000'), call('slow?ms=4000')];
    const metrics = async () => (await fetch(`${server.controllerUrl}/metrics`)).text();
    for (;;) {
      if (/flint_executor_instances\{[^}]*function="slow"[^}]*state="running"\} 2/.test(await metrics())) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const refused = await call('hello');
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get('retry-after'), '1');
    const body = (await refused.json()) as { code: string; message: string; retryAfterSeconds: number };
    assert.equal(body.code, 'FLINT_ERR_UNAVAILABLE');
    assert.equal(body.retryAfterSeconds, 1);
    assert.match(body.message, /the instance budget is spent \(all 2 instances of executor\.maxInstances are in use\)/);
    for (const r of await Promise.all(busy)) assert.equal(r.status, 200);

    const served = await call('hello');
    assert.equal(served.status, 200);
    assert.equal(await served.text(), 'hello\n');
    const m = await metrics();
    assert.match(m, /flint_executor_budget_instances\{state="limit"\} 2/);
    assert.match(m, /flint_executor_budget_instances\{state="used"\} [12]\b/);
    assert.match(m, /flint_executor_instances\{[^}]*function="hello"[^}]*state="running"\} 1/);
    // Starts in progress and waiting, and how many may run at once (twice the cores unless set).
    assert.match(m, /flint_executor_worker_starts\{state="starting"\} \d+/);
    assert.match(m, /flint_executor_worker_starts\{state="waiting"\} \d+/);
    assert.match(m, new RegExp(`flint_executor_worker_starts\\{state="limit"\\} ${os.availableParallelism() * 2}\\b`));
    // fn pods shows the instances and the budget they draw from.
    const pods = flint(server, ['fn', 'pods', '--name', 'hello'], { cwd: work });
    assert.equal(pods.code, 0, pods.stderr);
    assert.match(pods.stdout, /^NAME\s+STATE\s+VERSION\s+ACTIVE\s+SERVED\s+AGE\s+IDLE$/m);
    assert.match(pods.stdout, /^nodejs-\S+\s+ready\s+current\s+0\s+1\s+\d+s\s+\d+s$/m);
    assert.match(pods.stdout, /^instance budget: [12] of 2 instances, \d+ of \d+ MB, all functions together$/m);
    const json = JSON.parse(flint(server, ['fn', 'pods', '--name', 'slow', '-o', 'json'], { cwd: work }).stdout);
    assert.equal(json.budget.maxInstances, 2);
    assert.ok(json.items.length <= 1, 'one of the two slow instances was stopped for hello');
    const missing = flint(server, ['fn', 'pods', '--name', 'ghost'], { cwd: work });
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /function 'ghost' not found/);
    const log = flint(server, ['fn', 'log', '--name', 'slow'], { cwd: work });
    assert.match(log.stdout, /reclaimed for function 'hello': the instance budget is spent/);
  });
});
