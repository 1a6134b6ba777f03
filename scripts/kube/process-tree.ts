// Every process under a root, read from /proc: bwrap runs a container's init
// in a session of its own, so a pod's processes are found and signalled one
// by one rather than as a process group.
import fs from 'node:fs';

/** The processes below `root` (not `root` itself), parents before children. */
export function descendants(root: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {}
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const p = queue.shift() as number;
    for (const [pid, ppid] of parentOf) {
      if (ppid === p) {
        found.push(pid);
        queue.push(pid);
      }
    }
  }
  return found;
}
