import fs from 'node:fs';
import path from 'node:path';
import type { RuntimeLaunch } from '../launch.ts';

let nodeBinary: string | undefined;
function node(): string {
  nodeBinary ??= fs.realpathSync(process.execPath);
  return nodeBinary;
}

export const nodeLaunch: RuntimeLaunch = {
  dir: import.meta.dirname,
  binaries: () => [node()],
  command: (dir, heapMB, bin) => [bin(node()), `--max-old-space-size=${heapMB}`, path.posix.join(dir, 'server.ts')],
  // npm comes from the machine (/usr/bin/npm with its own node): the pinned
  // node package ships no npm, and a build only needs some npm, not ours.
  builder: {
    dir: path.join(import.meta.dirname, 'builder'),
    binaries: () => [],
  },
};
