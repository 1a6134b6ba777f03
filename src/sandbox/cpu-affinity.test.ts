import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { cpuListProblem, formatCpuList, onCpus, parseCpuList, pinProcess, usableCpus } from './cpu-affinity.ts';

const maskOf = (pid: number | string) => /^Cpus_allowed_list:\s*(\S+)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];

describe('cpu-affinity', () => {
  it('reads CPU lists as taskset writes them', () => {
    assert.deepEqual(parseCpuList(''), []);
    assert.deepEqual(parseCpuList('0'), [0]);
    assert.deepEqual(parseCpuList('0-3'), [0, 1, 2, 3]);
    assert.deepEqual(parseCpuList('3,0-1,1'), [0, 1, 3]);
    assert.equal(formatCpuList([0, 1, 2, 3, 6, 8, 9]), '0-3,6,8-9');
    assert.equal(formatCpuList([]), '');
  });

  it('refuses what is not a CPU list, and ranges that run backwards', () => {
    for (const bad of ['a', '-1', '0-', '0,,1', ' 0', '0;reboot', '1-0x', '0 1', '$(id)']) assert.throws(() => parseCpuList(bad), /is not a CPU list/, bad);
    assert.throws(() => parseCpuList('3-1'), /has a range that runs backwards: 3-1/);
  });

  it('says why a list cannot be used here: bad syntax, or a CPU this process may not use', () => {
    assert.equal(cpuListProblem(''), undefined);
    assert.equal(cpuListProblem(String(usableCpus()[0])), undefined);
    assert.match(cpuListProblem('99999') ?? '', /names CPU 99999, which this process cannot use \(it may use [0-9,-]+\)/);
    assert.match(cpuListProblem('99998-99999') ?? '', /names CPUs 99998-99999, which/);
    assert.match(cpuListProblem('0,x') ?? '', /is not a CPU list/);
  });

  it('runs a command on the CPUs of a list, and leaves it as it is for none', () => {
    const cpu = String(usableCpus().at(-1));
    const command = ['/bin/sh', '-c', 'grep Cpus_allowed_list /proc/self/status'];
    assert.deepEqual(onCpus('', command), command);
    const r = spawnSync(onCpus(cpu, command)[0], onCpus(cpu, command).slice(1), { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`Cpus_allowed_list:\\s*${cpu}\\n`));
  });

  it('pins every thread of a running process', async () => {
    // A node process has several threads (V8's and libuv's) before it runs any code of ours.
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 10000)'], { stdio: 'ignore' });
    try {
      // Polled: under load the child may take a while to start its threads.
      for (let i = 0; i < 100 && !(fs.existsSync(`/proc/${child.pid}/task`) && fs.readdirSync(`/proc/${child.pid}/task`).length > 1); i++) await new Promise((r) => setTimeout(r, 50));
      const cpu = String(usableCpus()[0]);
      pinProcess(child.pid as number, cpu);
      const threads = fs.readdirSync(`/proc/${child.pid}/task`);
      assert.ok(threads.length > 1, 'the child has threads');
      for (const t of threads) assert.equal(maskOf(`${child.pid}/task/${t}`), cpu, `thread ${t}`);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('says what taskset refused when a process cannot be placed (a CPU the kernel will not give it)', () => {
    const child = spawn('sleep', ['10'], { stdio: 'ignore' });
    try {
      assert.throws(() => pinProcess(child.pid as number, '99999'), new RegExp(`taskset could not place process ${child.pid} on CPUs 99999: .+`));
    } finally {
      child.kill('SIGKILL');
    }
  });
});
