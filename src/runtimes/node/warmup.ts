// Runs once while the worker is still generic (in the warm pool, off any
// request's path): the first import() of a user file and the first request
// pay for initializing Node's module loader and HTTP code, which would
// otherwise land on the function's cold start.
import fs from 'node:fs';
import path from 'node:path';
import { loadHandler } from './loader.ts';

export async function warmUp(): Promise<void> {
  let dir: string | undefined;
  try {
    // node:os is loaded here, not at the top: a worker started for a waiting request never warms up.
    // Inside the try: a worker whose temporary directory cannot be written still starts, unwarmed.
    dir = fs.mkdtempSync(path.join(process.getBuiltinModule('node:os').tmpdir(), 'flint-warm-'));
    const cjs = path.join(dir, 'warm');
    fs.writeFileSync(cjs, 'module.exports = async () => ({ status: 200, body: "ok" });\n');
    const esm = path.join(dir, 'warm-esm');
    fs.writeFileSync(esm, 'export default async () => ({ status: 200, body: "ok" });\n');
    await loadHandler(cjs, undefined);
    await loadHandler(esm, undefined);
  } catch {
    // Warming is an optimisation only.
  } finally {
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  }
}
