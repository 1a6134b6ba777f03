// Bundles the Node.js runtime (src/runtimes/node/server.ts and the files it
// imports) into src/runtimes/node/server.bundle.cjs, the file workers start
// from while its sources are unchanged (src/runtimes/node/bundle.ts says
// why). Run by `npm run generate`; a test rebuilds it and fails on a diff.
// `ws` stays outside: workers load the very files npm installed (launch.ts).
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { BUNDLE_NAME, bundleHeader } from '../src/runtimes/node/bundle.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
export const RUNTIME_DIR = path.join(ROOT, 'src', 'runtimes', 'node');
export const BUNDLE_FILE = path.join(RUNTIME_DIR, BUNDLE_NAME);

/** The bundle's text, built from the sources as they are now. */
export async function renderNodeRuntimeBundle(): Promise<string> {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [path.join(RUNTIME_DIR, 'server.ts')],
    bundle: true,
    write: false,
    format: 'cjs',
    platform: 'node',
    target: 'node22',
    external: ['ws'],
    // The loader's import() of an ES module with top-level await must stay an import(), not become a require().
    supported: { 'dynamic-import': true },
    metafile: true,
    legalComments: 'none',
    charset: 'utf8',
    logLevel: 'warning',
  });
  const names = Object.keys(result.metafile.inputs)
    .map((f) => path.resolve(ROOT, f))
    .map((f) => {
      if (path.dirname(f) !== RUNTIME_DIR) throw new Error(`the node runtime imports ${path.relative(ROOT, f)}, outside its directory: a sandboxed worker could not load it`);
      return path.basename(f);
    })
    .sort();
  return bundleHeader(RUNTIME_DIR, names) + result.outputFiles[0].text;
}

if (import.meta.main) {
  fs.writeFileSync(BUNDLE_FILE, await renderNodeRuntimeBundle());
  console.log(`wrote ${path.relative(process.cwd(), BUNDLE_FILE)}`);
}
