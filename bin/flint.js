#!/usr/bin/env node
// The `flint` command. Runs the bundle in dist/cli (scripts/build-cli.ts,
// built by `npm install` and `npm pack`) while no source it was built from
// has changed since, else the TypeScript sources with Node's type stripping:
// an edited checkout runs what it says, only slower.
// process.getBuiltinModule, not import: an import of node:fs reads all its
// exports, and one of them (ReadStream) loads the streams, 7 ms of start-up.
const builtin = process.getBuiltinModule ?? (await import('node:module')).createRequire(import.meta.url);
const fs = builtin('node:fs');
const path = builtin('node:path');
const { fileURLToPath, pathToFileURL } = builtin('node:url');

// A reader that stops early (`flint fn list | head -1`) closes the pipe: the
// rest of the output is not wanted, which is no error and no stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const argv = process.argv.slice(2);
const debug = (m) => process.env.FLINT_DEBUG && process.stderr.write(`flint: ${m}\n`);
// Node strips types only outside node_modules, so a flint npm installed
// (npm install -g of a packed tarball) runs its bundle, which npm pack built
// from the same sources. Its files' times are the install's, not the build's.
const installed = root.split(path.sep).includes('node_modules');

/** The command word: the first that is neither a flag nor the namespace flag's value. */
function commandWord() {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-n' || a === '--namespace') i++;
    else if (!a.startsWith('-')) return a;
  }
  return undefined;
}

/** The bundle's entry, when it was built after every source it holds last changed. */
function freshBundle() {
  if (process.env.FLINT_CLI_SOURCES && !installed) return undefined;
  const entry = pathToFileURL(path.join(root, 'dist', 'cli', 'flint.js')).href;
  if (installed) return entry;
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(root, 'dist', 'cli', 'inputs.json'), 'utf8'));
  } catch {
    debug('no CLI bundle (npm run build makes one): running the sources');
    return undefined;
  }
  for (const file of manifest.inputs) {
    const st = fs.statSync(path.join(root, file), { throwIfNoEntry: false });
    if (st === undefined || st.mtimeMs > manifest.builtAt) {
      debug(`${file} changed after the CLI bundle was built (npm run build): running the sources`);
      return undefined;
    }
  }
  return entry;
}

/**
 * Compiled code is cached per user (never in a shared /tmp, where another
 * user could leave code for this one to run). NODE_COMPILE_CACHE, when set,
 * has already chosen; NODE_DISABLE_COMPILE_CACHE turns it off.
 */
function enableCompileCache() {
  const module = builtin('node:module');
  if (typeof module.enableCompileCache !== 'function' || process.env.NODE_COMPILE_CACHE) return;
  try {
    // homedir() throws where there is neither HOME nor a passwd entry (a sandbox, a pod): no cache then.
    const base = process.env.XDG_CACHE_HOME || path.join(builtin('node:os').homedir(), '.cache');
    const dir = path.join(base, 'flint', 'compile-cache');
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    module.enableCompileCache(dir);
  } catch (err) {
    debug(`no compile cache: ${err.message}`);
  }
}

// Type stripping came with Node 22.18: an older Node runs the bundle, and is
// pointed at the checkout's pinned Node for what only the sources hold (the
// server, or everything when there is no fresh bundle).
const [major, minor] = process.versions.node.split('.').map(Number);
const stripsTypes = major > 22 || (major === 22 && minor >= 18);
const bundle = freshBundle();
const serverSide = ['server', 'fetcher'].includes(commandWord());
if (installed && serverSide) {
  console.error(
    `Error: flint ${commandWord()} runs from a checkout of flint (npm install, then npm start there; npm link puts that flint on the PATH): Node does not run TypeScript under node_modules, where npm installed this one`,
  );
  process.exit(1);
}
if (!stripsTypes && (bundle === undefined || serverSide)) {
  const pinned = path.join(root, 'node_modules', 'node', 'bin', 'node');
  if (fs.existsSync(pinned)) {
    const { spawnSync } = builtin('node:child_process');
    const r = spawnSync(pinned, [fileURLToPath(import.meta.url), ...argv], { stdio: 'inherit' });
    process.exit(r.status ?? 1);
  }
  console.error(`Error: flint ${serverSide ? 'server' : 'from its sources'} needs Node.js 22.18 or newer (this is ${process.version}); run 'npm install' in the flint checkout`);
  process.exit(1);
}
if (bundle) enableCompileCache();
const { main } = await import(bundle ?? '../src/cli/main.ts');
const code = await main(argv);
if (typeof code === 'number') process.exitCode = code;
