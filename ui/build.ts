// Bundles the dashboard (ui/src, Preact + htm + uPlot) into the static files
// the control plane serves (src/ui/static): app.js, app.css, index.html and
// the icon. The output is committed, so `npm start` needs no build step;
// src/ui/bundle.test.ts builds again and fails on any difference, so the
// options here must keep the output deterministic (no source maps, no
// timestamps, one fixed target).
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

export const UI_SOURCE = import.meta.dirname;
export const UI_OUT = path.join(import.meta.dirname, '..', 'src', 'ui', 'static');
const COPIED = ['index.html', 'favicon.svg'];

/** File name -> contents of every file the build writes. */
export async function buildUi(): Promise<Map<string, Buffer>> {
  const result = await build({
    entryPoints: { app: path.join(UI_SOURCE, 'src', 'main.ts') },
    bundle: true,
    format: 'esm',
    target: 'es2022',
    minify: true,
    legalComments: 'eof',
    sourcemap: false,
    charset: 'utf8',
    write: false,
    outdir: UI_OUT,
    absWorkingDir: path.join(UI_SOURCE, '..'),
    logLevel: 'silent',
  });
  const files = new Map<string, Buffer>();
  for (const f of result.outputFiles) files.set(path.basename(f.path), Buffer.from(f.contents));
  for (const name of COPIED) files.set(name, fs.readFileSync(path.join(UI_SOURCE, name)));
  return files;
}

if (import.meta.main) {
  const files = await buildUi();
  fs.rmSync(UI_OUT, { recursive: true, force: true });
  fs.mkdirSync(UI_OUT, { recursive: true });
  for (const [name, body] of files) fs.writeFileSync(path.join(UI_OUT, name), body);
  console.log(`wrote ${[...files.keys()].map((n) => path.join('src/ui/static', n)).join(', ')}`);
}
