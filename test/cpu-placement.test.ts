// router.cpus and executor.workerCpus: the server and everything in it run on
// the router's CPUs, function workers and builds on theirs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { usableCpus } from '../src/sandbox/cpu-affinity.ts';
import { descendants } from '../src/testing/process-tree.ts';
import { flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;
const cpus = usableCpus();
// With one CPU both lists name it: the test still shows each list reaching its processes.
const routerCpu = String(cpus[0]);
const workerCpu = String(cpus.at(-1));

function ok(args: string[]): string {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')}:\n${r.stderr}`);
  return r.stdout;
}

const maskOf = (pidOrTask: string) => /^Cpus_allowed_list:\s*(\S+)$/m.exec(fs.readFileSync(`/proc/${pidOrTask}/status`, 'utf8'))?.[1];

/** The descendants of `root` that run the Node runtime's server (the worker's own node, sandboxed or not). */
function runtimesUnder(root: number): number[] {
  return descendants(root).filter((pid) => {
    try {
      const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return args.some((a) => /(^|\/)(server\.bundle\.cjs|runtimes\/node\/server\.ts)$/.test(a)) && !args[0].endsWith('bwrap');
    } catch {
      return false;
    }
  });
}

describe('CPU placement', { timeout: 120_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-cpus-'));
    server = await startServer({ sets: [`router.cpus=${routerCpu}`, `executor.workerCpus=${workerCpu}`] });
    fs.writeFileSync(path.join(work, 'hello.js'), 'module.exports = async () => ({ body: "hello\\n" });');
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    ok(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it("runs every thread of the server on router.cpus and the function's worker on executor.workerCpus", async () => {
    const r = await fetch(`${server.routerUrl}/flint-function/hello`);
    assert.equal(await r.text(), 'hello\n');
    const pid = server.child.pid as number;
    for (const t of fs.readdirSync(`/proc/${pid}/task`)) assert.equal(maskOf(`${pid}/task/${t}`), routerCpu, `server thread ${t}`);
    const workers = runtimesUnder(pid);
    assert.ok(workers.length >= 1, 'a worker runs');
    for (const w of workers) {
      assert.equal(maskOf(String(w)), workerCpu, `worker ${w}`);
      for (const t of fs.readdirSync(`/proc/${w}/task`)) assert.equal(maskOf(`${w}/task/${t}`), workerCpu, `worker ${w} thread ${t}`);
    }
  });

  it('refuses to start on a CPU list this machine cannot use, naming the value', async () => {
    const r = flint(server, ['server', '--set', 'executor.workerCpus=99999', '--set', 'router.port=0', '--set', 'controller.port=0'], { cwd: work });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /install value 'executor\.workerCpus' names CPU 99999, which this process cannot use/);
  });
});
