#!/usr/bin/env node
// Launches the TypeScript CLI with Node's type stripping. npm scripts and npx
// put the project's pinned Node 24 first on PATH; an older Node that cannot
// strip types is pointed at it instead of failing with a syntax error.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  const pinned = fileURLToPath(new URL('../node_modules/node/bin/node', import.meta.url));
  if (existsSync(pinned)) {
    const r = spawnSync(pinned, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
    process.exit(r.status ?? 1);
  }
  console.error(`Error: flint needs Node.js 22.18 or newer (this is ${process.version}); run 'npm install' in the flint checkout`);
  process.exit(1);
}
// A reader that stops early (`flint fn list | head -1`) closes the pipe: the
// rest of the output is not wanted, which is no error and no stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}
const { main } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
if (typeof code === 'number') process.exitCode = code;
