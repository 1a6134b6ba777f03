// The Python runtime: server.py under the machine's python3 (from /usr, the
// only part of the file system the sandbox shows), stdlib only.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { FlintError } from '../../api/errors.ts';
import type { RuntimeLaunch } from '../launch.ts';

const CANDIDATES = ['/usr/bin/python3', '/usr/local/bin/python3'];

function python(): string | undefined {
  return CANDIDATES.find((p) => fs.existsSync(p));
}

let checked: Promise<void> | undefined;
function check(): Promise<void> {
  checked ??= new Promise<void>((resolve, reject) => {
    const py = python();
    const missing = 'the python runtime needs python3 (3.9 or later) in /usr/bin: apt-get install python3';
    if (!py) return reject(new FlintError('FLINT_ERR_UNAVAILABLE', missing));
    execFile(py, ['-c', 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)'], { timeout: 10_000 }, (err) =>
      err ? reject(new FlintError('FLINT_ERR_UNAVAILABLE', `${missing} (${py} is older or broken)`)) : resolve(),
    );
  }).catch((err: unknown) => {
    // Not memoized, as the Go runtime's build is not: a python3 installed later is found by the next worker (or pod).
    checked = undefined;
    throw err;
  });
  return checked;
}

export const pythonLaunch: RuntimeLaunch = {
  dir: import.meta.dirname,
  prepare: check,
  // /usr is in every sandbox already.
  binaries: () => [],
  // -u: print() reaches the function log at once. -B: the code directory is
  // read-only, so no bytecode files. The memory cap is the worker's cgroup:
  // RLIMIT_AS would also count the threads' reserved stacks and fail early.
  command: (dir) => [python() as string, '-u', '-B', '-X', 'utf8', path.posix.join(dir, 'server.py')],
  builder: {
    dir: path.join(import.meta.dirname, 'builder'),
    binaries: () => [],
    env: () => ({ FLINT_PYTHON: python() ?? 'python3' }),
  },
};
