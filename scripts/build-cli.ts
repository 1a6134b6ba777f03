// Bundles the `flint` command into dist/cli (`npm run build`, and npm's
// `prepare`: every `npm install` in the checkout and every `npm pack`).
// One file of plain JavaScript starts several times faster than the
// TypeScript sources, which Node strips of types file by file, and its
// dependencies, resolved file by file. bin/flint.js runs the bundle only
// while no source it was built from has changed since (see cli-bundle.js).
//
// The bundle sits two directories down, as src/cli does, so the sources'
// `new URL('../../package.json', import.meta.url)` still find their file.
// `flint server` and `flint fetcher` are not bundled: they load the
// TypeScript sources, as they always did.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { build, type Plugin } from 'esbuild';

const ROOT = path.resolve(import.meta.dirname, '..');
export const OUT_DIR = path.join(ROOT, 'dist', 'cli');
const SERVER_ENTRIES = ['src/server/main.ts', 'src/fetcher/server.ts'];

/** The server and the fetcher stay TypeScript sources, imported from the bundle's place. */
const sourcesOutside: Plugin = {
  name: 'flint-sources-outside',
  setup(b) {
    b.onResolve({ filter: /\.ts$/ }, (args) => {
      const file = path.resolve(args.resolveDir, args.path);
      if (!SERVER_ENTRIES.includes(path.relative(ROOT, file))) return undefined;
      return { path: path.relative(OUT_DIR, file), external: true };
    });
  },
};

/**
 * Node's builtins, loaded at first use. An import of a builtin reads all its
 * exports at start-up, and some load more: node:crypto costs 5 ms,
 * node:fs's ReadStream getter 7 ms, commander's node:child_process (for a
 * kind of subcommand Flint does not have) 4 ms. Each builtin becomes a
 * module whose exports are known (listed here, at build time) but fetched
 * from the real module only when first read.
 */
const lazyBuiltins: Plugin = {
  name: 'flint-lazy-builtins',
  setup(b) {
    const require = createRequire(import.meta.url);
    b.onResolve({ filter: /^node:|^(child_process|events|fs|path|process|buffer|stream|util|zlib|os|crypto)$/ }, (args) => {
      const name = args.path.startsWith('node:') ? args.path : `node:${args.path}`;
      return args.namespace === 'builtin' ? { path: name, external: true } : { path: name, namespace: 'builtin' };
    });
    b.onLoad({ filter: /.*/, namespace: 'builtin' }, (args) => {
      const keys = JSON.stringify(Object.keys(require(args.path)));
      const contents = [
        `const keys = new Set(${keys});`,
        'let real;',
        `const load = () => (real ??= require(${JSON.stringify(args.path)}));`,
        'module.exports = new Proxy({}, {',
        '  get: (_, k) => load()[k],',
        '  has: (_, k) => keys.has(k),',
        '  ownKeys: () => [...keys],',
        '  getOwnPropertyDescriptor: (_, k) => (keys.has(k) ? { configurable: true, enumerable: true, get: () => load()[k] } : undefined),',
        '});',
      ].join('\n');
      return { contents, loader: 'js' };
    });
  },
};

export async function buildCli(): Promise<{ files: string[]; inputs: string[] }> {
  // Taken before esbuild reads a file: a source saved during the build counts as newer.
  const builtAt = Date.now();
  const tmp = `${OUT_DIR}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: { flint: 'src/cli/main.ts' },
    outdir: tmp,
    bundle: true,
    splitting: false,
    format: 'esm',
    platform: 'node',
    // Plain JavaScript runs where type stripping does not (Node 20): the installed command works on the PATH's node.
    target: 'node20',
    // Bundled CommonJS packages (commander, yaml) call require() for builtins.
    banner: { js: "import { createRequire as flintCreateRequire } from 'node:module';\nconst require = flintCreateRequire(import.meta.url);" },
    metafile: true,
    legalComments: 'none',
    logLevel: 'warning',
    plugins: [sourcesOutside, lazyBuiltins],
  });
  const inputs = Object.keys(result.metafile.inputs)
    .filter((f) => f.startsWith('src/'))
    .sort();
  fs.writeFileSync(path.join(tmp, 'inputs.json'), `${JSON.stringify({ builtAt, inputs }, null, 1)}\n`);
  // Swapped in whole: a `flint` starting meanwhile finds the old bundle, or none and runs the sources.
  const old = `${OUT_DIR}.old-${process.pid}`;
  fs.rmSync(old, { recursive: true, force: true });
  if (fs.existsSync(OUT_DIR)) fs.renameSync(OUT_DIR, old);
  fs.renameSync(tmp, OUT_DIR);
  fs.rmSync(old, { recursive: true, force: true });
  const files = Object.keys(result.metafile.outputs).map((f) => path.relative(tmp, path.resolve(ROOT, f)));
  return { files, inputs };
}

if (import.meta.main) {
  const { files, inputs } = await buildCli();
  console.log(`wrote ${path.relative(process.cwd(), OUT_DIR)}: ${files.length} files from ${inputs.length} sources`);
}
