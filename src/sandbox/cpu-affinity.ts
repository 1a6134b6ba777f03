// Which CPUs a process may run on (install values router.cpus and
// executor.workerCpus). On a machine where the router and the functions share
// cores, the scheduler puts a woken process beside its waker: at light load a
// request's router half, worker and router half again then run one after the
// other on one core, each on caches the other two just used, while the next
// core idles. Keeping them on different cores halved the router's added
// latency at 3,000 req/s here (bench/RESULTS.md, "a core of its own for the
// router"). At full load on two cores it cost throughput, so it is the
// operator's choice.
import { execFileSync } from 'node:child_process';
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

/** The CPUs this process may use now (its own affinity), from /proc; all of os.cpus() where that cannot be read. */
export function usableCpus(): number[] {
  try {
    const line = /^Cpus_allowed_list:\s*(\S+)$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1];
    if (line !== undefined) return parseCpuList(line);
  } catch {}
  return os.cpus().map((_, i) => i);
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
  if (missing.length > 0) return `names CPU ${missing.join(', ')}, which this process cannot use (it may use ${[...usable].join(',')})`;
  if (TASKSET === undefined) return 'needs taskset (util-linux), which is not installed';
  return undefined;
}

/** `command` run on the CPUs of `list` (checked by cpuListProblem); unchanged for ''. */
export function onCpus(list: string, command: string[]): string[] {
  if (list === '' || TASKSET === undefined) return command;
  return [TASKSET, '-c', list, ...command];
}

/** Puts every thread of process `pid` on the CPUs of `list` (checked by cpuListProblem); threads it starts later inherit it. */
export function pinProcess(pid: number, list: string): void {
  if (list === '' || TASKSET === undefined) return;
  execFileSync(TASKSET, ['-a', '-p', '-c', list, String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
}
