// The machine's processes as a tree, read from /proc, for tests that look at
// what a server or a worker started.
import fs from 'node:fs';

/** Every live process's children, by parent pid (a process that exits while this reads is left out). */
export function childrenByParent(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name in parentheses may hold spaces; the parent pid is the second field after it.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {}
  }
  return children;
}

/** The processes under `root`, not `root` itself, each parent before its children. */
export function descendants(root: number, children: Map<number, number[]> = childrenByParent()): number[] {
  const out: number[] = [];
  const walk = (pid: number) => {
    for (const c of children.get(pid) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(root);
  return out;
}
