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
};
