// A worker that stops answering without dying (SIGSTOP: a hung VM, a debugger,
// a process frozen by its cgroup): its request gets 504 at the function's
// timeout, the worker is killed and replaced, and other functions go on.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { childrenByParent, descendants } from '../src/testing/process-tree.ts';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

function ok(args: string[]): string {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')}:\n${r.stderr}`);
  return r.stdout;
}

/** Every process whose command line names `id` (the worker's bwrap names it as its hostname), and their descendants. */
function processesOf(id: string): number[] {
  const children = childrenByParent();
  const roots = [...children.values()].flat().filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(id);
    } catch {
      return false;
    }
  });
  return roots.flatMap((r) => [r, ...descendants(r, children)]);
}

const call = (name: string) => fetch(`${server.routerUrl}/flint-function/${name}`).then(async (r) => ({ status: r.status, text: await r.text() }));

describe('a stopped worker', { timeout: 120_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-sigstop-'));
    server = await startServer();
    fs.writeFileSync(path.join(work, 'a.js'), 'module.exports = async () => ({ body: "a\\n" });');
    fs.writeFileSync(path.join(work, 'b.js'), 'module.exports = async () => ({ body: "b\\n" });');
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '2']);
    ok(['fn', 'create', '--name', 'frozen', '--env', 'nodejs', '--code', 'a.js', '--fntimeout', '2']);
    ok(['fn', 'create', '--name', 'other', '--env', 'nodejs', '--code', 'b.js']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('answers 504 at the function timeout, replaces the worker, and leaves other functions alone', async () => {
    assert.deepEqual(await call('frozen'), { status: 200, text: 'a\n' });
    assert.deepEqual(await call('other'), { status: 200, text: 'b\n' });
    const id = /instance (\S+) specialized/.exec(ok(['fn', 'log', '--name', 'frozen']))?.[1];
    assert.ok(id, 'the instance id is in the log');
    const pids = processesOf(id);
    assert.ok(pids.length >= 2, `the worker's processes: ${pids}`);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');

    const stalled = call('frozen');
    // Meanwhile another function answers as usual.
    assert.deepEqual(await call('other'), { status: 200, text: 'b\n' });
    const r = await stalled;
    assert.equal(r.status, 504);
    assert.match(JSON.parse(r.text).message, /did not answer within its timeout of 2 s/);
    await eventually(() => pids.every((pid) => !fs.existsSync(`/proc/${pid}`) || /\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))), 'the stopped worker killed');
    assert.deepEqual(await call('frozen'), { status: 200, text: 'a\n' });
    assert.match(ok(['fn', 'log', '--name', 'frozen']), new RegExp(`instance ${id} exceeded the function timeout and is replaced`));
  });
});
