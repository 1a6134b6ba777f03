// Launch wrapper: joins the cgroups and sets rlimits, then execs the real
// command, so every process of a worker or a build starts inside its limits.
import type { WorkerCgroups } from './cgroup.ts';

const WRAPPER = 'set -e; while [ "$1" != "--" ]; do case "$1" in cg) echo $$ > "$2";; cpu) ulimit -t "$2";; esac; shift 2; done; shift; exec "$@"';

export function withLimits(command: string[], cg: WorkerCgroups | undefined, cpuSeconds: number | undefined): string[] {
  if (!cg && cpuSeconds === undefined) return command;
  const pre = (cg?.procsFiles ?? []).flatMap((f) => ['cg', f]);
  if (cpuSeconds !== undefined) pre.push('cpu', String(cpuSeconds));
  return ['/bin/sh', '-c', WRAPPER, 'flint-limits', ...pre, '--', ...command];
}
