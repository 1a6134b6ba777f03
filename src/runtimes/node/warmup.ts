// Runs once while the worker is still generic (in the warm pool, off any
// request's path): the first import() of a user file, the first
// specialization and the first requests pay for initializing Node's module
// loader and HTTP code, which would otherwise land on the function's cold
// start. server.ts makes the worker call itself once it listens.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { WARMUP_PATH, WARMUP_SPECIALIZE_PATH } from './app.ts';
import { loadHandler } from './loader.ts';

const HANDLER = 'async () => ({ status: 200, body: "ok" });\n';

export interface WarmFixtures {
  /** A CommonJS handler not loaded yet, for the specialization rehearsal. */
  specializeFile: string;
  remove(): void;
}

/** Loads a CommonJS and an ES module handler through the loader; leaves a third for the rehearsal. */
export async function warmUp(): Promise<WarmFixtures | undefined> {
  let dir: string | undefined;
  try {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-warm-'));
    const cjs = path.join(dir, 'warm');
    fs.writeFileSync(cjs, `module.exports = ${HANDLER}`);
    const esm = path.join(dir, 'warm-esm');
    fs.writeFileSync(esm, `export default ${HANDLER}`);
    const specializeFile = path.join(dir, 'warm-specialize');
    fs.writeFileSync(specializeFile, `module.exports = ${HANDLER}`);
    await loadHandler(cjs, undefined);
    await loadHandler(esm, undefined);
    const made = dir;
    return { specializeFile, remove: () => fs.rmSync(made, { recursive: true, force: true }) };
  } catch {
    // Warming is an optimisation only.
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
}

type Target = { socketPath: string } | { host: string; port: number };

function call(target: Target, method: string, urlPath: string, body?: string): Promise<void> {
  return new Promise((resolve) => {
    const headers = body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    const req = http.request({ ...target, method, path: urlPath, agent: false, headers }, (res) => {
      res.on('end', resolve);
      res.on('error', () => resolve());
      res.resume();
    });
    req.on('error', () => resolve());
    req.end(body);
  });
}

/** The worker's calls to itself: a specialization rehearsal, a request with a JSON body, one without. Errors are ignored. */
export async function selfWarm(target: Target, fixtures: WarmFixtures | undefined): Promise<void> {
  try {
    if (fixtures !== undefined) await call(target, 'POST', WARMUP_SPECIALIZE_PATH, JSON.stringify({ filepath: fixtures.specializeFile }));
    await call(target, 'POST', `${WARMUP_PATH}?a=1`, JSON.stringify({ warm: true }));
    await call(target, 'GET', WARMUP_PATH);
  } finally {
    fixtures?.remove();
  }
}
