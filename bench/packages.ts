// Packages benchmarks, each against a baseline in the same run:
//   - cold start of a function deployed as a zip of 2000 files vs one
//     deployed as a single file (both from the warm pool): what unpacking
//     costs a cold start once the deploy cache holds the tree;
//   - cold start of a Python function from the warm pool vs forking a fresh
//     python3 that serves one request (the cost a pool saves);
//   - a package's build through the build manager (sandbox, unpack, zip,
//     store) vs running the same builder script directly.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Pool } from 'undici';
import { zipDirectory } from '../src/archive/index.ts';
import { startServer } from '../test/helpers/server.ts';
import { fmt, forkPythonOnce, percentiles, timedFirstCall, uploadArchive, waitBuilt } from './lib.ts';

async function api(base: string, method: string, url: string, body?: unknown): Promise<any> {
  const res = await fetch(base + url, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

export async function packagesBench(sandbox: 'bubblewrap' | 'none', work: string, rounds: number): Promise<string[][]> {
  const rows: string[][] = [];
  const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error'] });
  const base = server.controllerUrl;
  const NS = '/v1/namespaces/default';
  const router = new Pool(server.routerUrl, { connections: 1 });
  try {
    await api(base, 'POST', `${NS}/environments`, { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, builder: { image: 'flint/node-builder', command: 'build' }, poolsize: 3 } });
    await api(base, 'POST', `${NS}/environments`, { metadata: { name: 'python' }, spec: { runtime: { image: 'flint/python-env' }, poolsize: 3 } });

    // A package as big as a small node_modules: 2000 files in 100 directories.
    const tree = path.join(work, 'tree');
    for (let d = 0; d < 100; d++) {
      fs.mkdirSync(path.join(tree, 'node_modules', `m${d}`), { recursive: true });
      for (let f = 0; f < 20; f++) fs.writeFileSync(path.join(tree, 'node_modules', `m${d}`, `f${f}.js`), `module.exports = ${d * 20 + f};\n`.repeat(20));
    }
    fs.writeFileSync(path.join(tree, 'index.js'), 'module.exports = async () => ({ body: "hello" });\n');
    await zipDirectory(tree, path.join(work, 'tree.zip'));
    const zipRef = await uploadArchive(base, fs.readFileSync(path.join(work, 'tree.zip')));
    const single = Buffer.from('module.exports = async () => ({ body: "hello" });\n').toString('base64');

    const zipCold: number[] = [];
    const fileCold: number[] = [];
    const pyCold: number[] = [];
    const pyForks: number[] = [];
    for (let i = 0; i < rounds; i++) {
      // Interleaved, so both sides see the same machine.
      for (const [name, deployment, env, into] of [
        [`zip-${i}`, zipRef, 'nodejs', zipCold],
        [`file-${i}`, { type: 'literal', literal: single }, 'nodejs', fileCold],
        [`py-${i}`, { type: 'literal', literal: Buffer.from('def main():\n    return "hello"\n').toString('base64') }, 'python', pyCold],
      ] as const) {
        await api(base, 'POST', `${NS}/packages`, { metadata: { name } , spec: { environment: { name: env }, deployment } });
        await api(base, 'POST', `${NS}/functions`, { metadata: { name }, spec: { environment: { name: env }, package: { packageref: { name } } } });
        await new Promise((r) => setTimeout(r, 600));
        if (into === pyCold) {
          // A fork next to each Python cold start, so drift in the VM's speed hits both alike.
          pyForks.push(await forkPythonOnce(work, `py-${i}`));
          await new Promise((r) => setTimeout(r, 100));
        }
        into.push(await timedFirstCall(router, name));
      }
    }
    const z = percentiles(zipCold);
    const f = percentiles(fileCold);
    rows.push(['cold start, 2000-file zip / single file', `${fmt(z.p50 / f.p50, 2)}x`, `zip p50 ${fmt(z.p50 / 1000, 1)} ms, single file p50 ${fmt(f.p50 / 1000, 1)} ms`, '']);
    const p = percentiles(pyCold);
    const pf = percentiles(pyForks);
    rows.push(['Python cold start from warm pool / fork python3', `${fmt(p.p50 / pf.p50, 2)}x`, `cold p50 ${fmt(p.p50 / 1000, 1)} ms (p99 ${fmt(p.p99 / 1000, 1)} ms), fork p50 ${fmt(pf.p50 / 1000, 1)} ms`, '']);

    // Build overhead: the Node builder on a source without dependencies.
    const src = path.join(work, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'index.js'), 'module.exports = async () => ({ body: "built" });\n');
    await zipDirectory(src, path.join(work, 'src.zip'));
    const srcRef = await uploadArchive(base, fs.readFileSync(path.join(work, 'src.zip')));
    const managed: number[] = [];
    const direct: number[] = [];
    const script = path.resolve(import.meta.dirname, '../src/runtimes/node/builder/build');
    for (let i = 0; i < rounds; i++) {
      const t0 = process.hrtime.bigint();
      await api(base, 'POST', `${NS}/packages`, { metadata: { name: `build-${i}` }, spec: { environment: { name: 'nodejs' }, source: srcRef } });
      await waitBuilt(base, `build-${i}`);
      managed.push(Number(process.hrtime.bigint() - t0) / 1000);
      const out = path.join(work, `direct-${i}`);
      const t1 = process.hrtime.bigint();
      const r = spawnSync(script, [], { cwd: src, env: { ...process.env, SRC_PKG: src, DEPLOY_PKG: out, FLINT_BUILD_CACHE: work } });
      if (r.status !== 0) throw new Error(`direct build: ${r.stderr}`);
      direct.push(Number(process.hrtime.bigint() - t1) / 1000);
    }
    const m = percentiles(managed);
    const d = percentiles(direct);
    rows.push(['build via build manager / builder script run directly', `${fmt(m.p50 / d.p50, 2)}x`, `managed p50 ${fmt(m.p50 / 1000, 1)} ms (create to succeeded), direct p50 ${fmt(d.p50 / 1000, 1)} ms`, '']);
  } finally {
    await router.close();
    await server.stop();
  }
  return rows;
}
