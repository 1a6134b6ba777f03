// Which CPUs a process may run on (install values router.cpus and
// executor.workerCpus). On a machine where the router and the functions share
// cores, the scheduler puts a woken process beside its waker: at light load a
// request's router half, worker and router half again then run one after the
// other on one core, each on caches the other two just used, while the next
// core idles. Keeping them on different cores halved the router's added
// latency at 3,000 req/s here (bench/RESULTS.md, "a core of its own for the
// router"). At full load on two cores it cost throughput, so it is the
// operator's choice.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';

/** A Linux CPU list, as taskset and cpusets write it: `0`, `0-3`, `0,2-3`; '' for no choice. */
export const CPU_LIST_PATTERN = '^([0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?)*)?$';

const TASKSET = ['/usr/bin/taskset', '/bin/taskset'].find((p) => fs.existsSync(p));

/**
 * The CPUs of a list (CPU_LIST_PATTERN's syntax), ascending. Throws on
 * anything else, with a message that reads after the value's name.
 */
export function parseCpuList(list: string): number[] {
  if (!new RegExp(CPU_LIST_PATTERN).test(list)) throw new Error(`is not a CPU list (such as 0, 0-3 or 0,2-3): ${JSON.stringify(list)}`);
  const cpus = new Set<number>();
  for (const part of list === '' ? [] : list.split(',')) {
    const [a, b = a] = part.split('-').map(Number);
    if (b < a) throw new Error(`has a range that runs backwards: ${part}`);
    for (let c = a; c <= b; c++) cpus.add(c);
  }
  return [...cpus].sort((x, y) => x - y);
}

/** A list of CPUs written with ranges, as the kernel writes them: 0-3,6. */
export function formatCpuList(cpus: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < cpus.length; i++) {
    let j = i;
    while (j + 1 < cpus.length && cpus[j + 1] === cpus[j] + 1) j++;
    parts.push(j === i ? String(cpus[i]) : `${cpus[i]}-${cpus[j]}`);
    i = j;
  }
  return parts.join(',');
}

function readList(file: string, pick: (text: string) => string | undefined): number[] | undefined {
  try {
    const text = pick(fs.readFileSync(file, 'utf8'));
    return text === undefined ? undefined : parseCpuList(text);
  } catch {
    return undefined;
  }
}

/**
 * The CPUs this process may use now: its own affinity (/proc/self/status)
 * among the CPUs online (an offline one may be in the affinity list, and
 * taskset would refuse it); all of os.cpus() where neither can be read.
 */
export function usableCpus(): number[] {
  const allowed = readList('/proc/self/status', (t) => /^Cpus_allowed_list:\s*(\S+)$/m.exec(t)?.[1]) ?? os.cpus().map((_, i) => i);
  const online = readList('/sys/devices/system/cpu/online', (t) => t.trim());
  return online === undefined ? allowed : allowed.filter((c) => online.includes(c));
}

/** Why `list` cannot be used on this machine, to follow the value's name, or undefined when it can ('' always can). */
export function cpuListProblem(list: string): string | undefined {
  let cpus: number[];
  try {
    cpus = parseCpuList(list);
  } catch (err) {
    return (err as Error).message;
  }
  if (cpus.length === 0) return undefined;
  const usable = new Set(usableCpus());
  const missing = cpus.filter((c) => !usable.has(c));
  if (missing.length > 0) {
    const which = missing.length === 1 ? `CPU ${missing[0]}, which this process cannot use` : `CPUs ${formatCpuList(missing)}, which this process cannot use`;
    return `names ${which} (it may use ${formatCpuList([...usable])})`;
  }
  if (TASKSET === undefined) return 'needs taskset (util-linux), which is not installed';
  return undefined;
}

/** `command` run on the CPUs of `list` (checked by cpuListProblem); unchanged for ''. */
export function onCpus(list: string, command: string[]): string[] {
  if (list === '' || TASKSET === undefined) return command;
  return [TASKSET, '-c', list, ...command];
}

/**
 * Puts every thread of process `pid` on the CPUs of `list` (checked by
 * cpuListProblem); threads it starts later inherit it. Throws with taskset's
 * own words when it refuses.
 */
export function pinProcess(pid: number, list: string): void {
  if (list === '' || TASKSET === undefined) return;
  const r = spawnSync(TASKSET, ['-a', '-p', '-c', list, String(pid)], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`taskset could not place process ${pid} on CPUs ${list}: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}`);
}
