// CPU time of processes from /proc (Linux): what the benchmarks charge to
// each process of a run. Ticks are USER_HZ (lib.ts TICKS_PER_S).
import fs from 'node:fs';

function statFields(pid: number | 'self'): string[] | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name, from field 3 (state) of proc(5) on.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** CPU of processes (every thread), in ticks: utime and stime, fields 14 and 15; NaN for one that is gone. */
export function cpuTicks(pids: number | number[] | undefined): number {
  if (Array.isArray(pids)) return pids.reduce((a, p) => a + cpuTicks(p), 0);
  const f = pids === undefined ? undefined : statFields(pids);
  return f ? Number(f[11]) + Number(f[12]) : Number.NaN;
}

/** The user-space part of cpuTicks(): utime alone. */
export function userTicks(pids: number | number[]): number {
  if (Array.isArray(pids)) return pids.reduce((a, p) => a + userTicks(p), 0);
  const f = statFields(pids);
  return f ? Number(f[11]) : Number.NaN;
}

/** CPU of this process's children that have exited (wrk runs): cutime and cstime, fields 16 and 17. */
export function childTicks(): number {
  const f = statFields('self');
  return f ? Number(f[13]) + Number(f[14]) : Number.NaN;
}
