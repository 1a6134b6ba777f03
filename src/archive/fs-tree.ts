// A directory on disk seen as a TreeView (tree-model.ts), read with lstat and
// readlink only, so the links in a tree that was unpacked or built can be
// resolved by the same rule as an archive's entries without trusting the
// kernel's resolution of them.
import fs from 'node:fs';
import path from 'node:path';
import type { Looked, TreeView } from './tree-model.ts';

export function fsTree(root: string): TreeView {
  return {
    lookup(parts: readonly string[]): Looked {
      const p = path.join(root, ...parts);
      let st: fs.Stats;
      try {
        st = fs.lstatSync(p);
      } catch {
        return { kind: 'missing' };
      }
      if (st.isSymbolicLink()) return { kind: 'link', target: fs.readlinkSync(p) };
      return { kind: st.isDirectory() ? 'dir' : 'file' };
    },
  };
}
