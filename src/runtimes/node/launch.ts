// The Node.js runtime: server.ts under the node binary running Flint itself,
// plus one package, `ws`, whose WebSockets are what a function gets.
//
// ws is a runtime dependency of Flint (package.json pins it exactly), so npm
// installs it, checked against the lockfile's integrity hash, wherever Flint
// runs: the checkout's node_modules, or the image's, which installs runtime
// dependencies only. In the sandbox the worker sees the runtime directory at
// /flint/runtime and not the project's node_modules, so the package's own
// directory, as this process resolves it, is bound read-only at
// /flint/node_modules/ws: Node looks there for a bare import from a file in
// /flint/runtime (after /flint/runtime/node_modules, which a read-only bind
// could not hold a mount point in). A bind and not a copy: the project
// carries no code from elsewhere, and the bind runs the very files npm
// installed and verified, the same ones an unsandboxed worker and Flint's
// own tests load. ws needs nothing else: it has no dependencies, and goes on
// without its optional add-ons bufferutil and utf-8-validate, which Flint
// does not install.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { FlintError } from '../../api/errors.ts';
import type { RuntimeBind, RuntimeLaunch } from '../launch.ts';
import { BUNDLE_NAME, bundleIsFresh } from './bundle.ts';

/** The one package the runtime imports: what server.ts and its modules may load besides Node's built-ins and their own directory. */
export const RUNTIME_PACKAGES = ['ws'] as const;

let nodeBinary: string | undefined;
function node(): string {
  nodeBinary ??= fs.realpathSync(process.execPath);
  return nodeBinary;
}

let packageDirs: Map<string, string> | undefined;
/**
 * Host directories of RUNTIME_PACKAGES, resolved once from here, as the
 * runtime's own imports resolve them on the host (symlinks resolved, so the
 * bind shows the files themselves).
 */
export function runtimePackageDirs(): Map<string, string> {
  if (!packageDirs) {
    const require = createRequire(import.meta.url);
    const dirs = new Map<string, string>();
    for (const name of RUNTIME_PACKAGES) {
      let manifest: string;
      try {
        manifest = require.resolve(`${name}/package.json`);
      } catch (err) {
        throw new FlintError('FLINT_ERR_UNAVAILABLE', `the node runtime needs the ${name} package, a dependency of Flint's (npm ci installs it): ${(err as Error).message}`);
      }
      dirs.set(name, path.dirname(manifest));
    }
    packageDirs = dirs;
  }
  return packageDirs;
}

let entry: string | undefined;
/** The file a worker starts from: the bundle while its sources are unchanged (bundle.ts), else server.ts. Decided once per process. */
export function nodeRuntimeEntry(): string {
  if (entry === undefined) {
    entry = bundleIsFresh(import.meta.dirname) ? BUNDLE_NAME : 'server.ts';
    if (entry === 'server.ts') {
      process.emitWarning(`the node runtime's sources changed after ${BUNDLE_NAME} was built: workers start from the sources, slower, until \`npm run generate\` rebuilds it`, { code: 'FLINT_RUNTIME_BUNDLE_STALE' });
    }
  }
  return entry;
}

export const nodeLaunch: RuntimeLaunch = {
  dir: import.meta.dirname,
  binaries: () => [node()],
  binds: (runtimeDir): RuntimeBind[] =>
    [...runtimePackageDirs()].map(([name, host]) => ({ host, at: path.posix.join(path.posix.dirname(runtimeDir), 'node_modules', name) })),
  command: (dir, heapMB, bin) => [bin(node()), `--max-old-space-size=${heapMB}`, path.posix.join(dir, nodeRuntimeEntry())],
  // npm comes from the machine (/usr/bin/npm with its own node): the pinned
  // node package ships no npm, and a build only needs some npm, not ours.
  builder: {
    dir: path.join(import.meta.dirname, 'builder'),
    binaries: () => [],
  },
};
