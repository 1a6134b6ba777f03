import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { BUNDLE_FILE, RUNTIME_DIR, renderNodeRuntimeBundle } from '../../../scripts/build-node-runtime.ts';
import { BUNDLE_NAME, bundleHeader, bundleIsFresh } from './bundle.ts';
import { request as runtimeRequest } from './testing.ts';

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bundle-'));
}

describe('node runtime bundle', () => {
  it('the committed bundle is what the sources build (run `npm run generate` after changing the runtime)', async () => {
    assert.equal(fs.readFileSync(BUNDLE_FILE, 'utf8'), await renderNodeRuntimeBundle());
    assert.equal(bundleIsFresh(RUNTIME_DIR), true);
  });

  it('is stale once a source it names changes, and fresh again when it is restored', () => {
    const dir = tmpDir();
    try {
      fs.writeFileSync(path.join(dir, 'a.ts'), 'export const a = 1;\n');
      fs.writeFileSync(path.join(dir, BUNDLE_NAME), `${bundleHeader(dir, ['a.ts'])}"use strict";\n`);
      assert.equal(bundleIsFresh(dir), true);
      fs.writeFileSync(path.join(dir, 'a.ts'), 'export const a = 2;\n');
      assert.equal(bundleIsFresh(dir), false);
      fs.writeFileSync(path.join(dir, 'a.ts'), 'export const a = 1;\n');
      assert.equal(bundleIsFresh(dir), true);
      fs.rmSync(path.join(dir, 'a.ts'));
      assert.equal(bundleIsFresh(dir), false, 'a source that is gone');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a header that names files outside its directory, or no header, is never fresh', () => {
    const dir = tmpDir();
    try {
      const outside = path.join(dir, 'outside.ts');
      fs.writeFileSync(outside, 'x');
      const inner = path.join(dir, 'rt');
      fs.mkdirSync(inner);
      // A header forged to digest a file the runtime directory does not hold.
      const forged = bundleHeader(dir, ['outside.ts']).replace('outside.ts', '../outside.ts');
      fs.writeFileSync(path.join(inner, BUNDLE_NAME), `${forged}"use strict";\n`);
      assert.equal(bundleIsFresh(inner), false);
      fs.writeFileSync(path.join(inner, BUNDLE_NAME), '"use strict";\n');
      assert.equal(bundleIsFresh(inner), false);
      fs.rmSync(path.join(inner, BUNDLE_NAME));
      assert.equal(bundleIsFresh(inner), false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  /** The bundle started in `dir` (node flags first), a request helper for its socket, and a stop that closes its stdin. */
  async function startBundle(dir: string, nodeArgs: string[] = [], env: Record<string, string> = {}) {
    const sock = path.join(dir, 'w.sock');
    const child = spawn(process.execPath, [...nodeArgs, BUNDLE_FILE], { env: { ...process.env, FLINT_SOCKET: sock, FLINT_EXIT_ON_STDIN_EOF: '1', ...env }, stdio: ['pipe', 'ignore', 'inherit'] });
    const request = async (method: string, p: string, body?: string) => {
      const r = await runtimeRequest(sock, p, { method, body, headers: body ? { 'content-type': 'application/json' } : {} });
      return { status: r.status, text: r.text };
    };
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.stdin!.end();
        await new Promise((r) => child.once('exit', r));
      }
    };
    for (let i = 0; i < 400 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 25));
    return { request, stop };
  }

  it('the bundle serves: specialized with an ES module that uses top-level await, it answers', async () => {
    const dir = tmpDir();
    const fn = path.join(dir, 'fn.mjs');
    fs.writeFileSync(fn, 'const v = await Promise.resolve("tla");\nexport default async () => ({ status: 200, body: v });\n');
    const w = await startBundle(dir);
    try {
      const spec = await w.request('POST', '/v2/specialize', JSON.stringify({ filepath: fn }));
      assert.equal(spec.status, 200, spec.text);
      const r = await w.request('GET', '/');
      assert.deepEqual(r, { status: 200, text: 'tla' });
    } finally {
      await w.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a pool worker whose temporary directory cannot be written still starts, unwarmed', async () => {
    const dir = tmpDir();
    const w = await startBundle(dir, [], { TMPDIR: path.join(dir, 'missing') });
    try {
      assert.equal((await w.request('GET', '/healthz')).status, 200);
    } finally {
      await w.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a worker a request waits for loads no module it would need only to warm up, nor node:fs/promises to find the code', async () => {
    // Each such module costs every worker start: fs/promises brought readline and the fs watchers, 3-6 ms of a 55 ms start.
    const dir = tmpDir();
    const loaded = path.join(dir, 'modules.txt');
    const preload = path.join(dir, 'preload.cjs');
    fs.writeFileSync(preload, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(loaded)}, process.moduleLoadList.join('\\n')));\n`);
    // A package directory: its entry is found through package.json, then the directory listing.
    const pkg = path.join(dir, 'pkg');
    fs.mkdirSync(pkg);
    fs.writeFileSync(path.join(pkg, 'package.json'), '{"main": "missing.js"}');
    fs.writeFileSync(path.join(pkg, 'handler.js'), 'module.exports = async () => ({ status: 200, body: "found" });\n');
    const w = await startBundle(dir, ['--require', preload], { FLINT_WARM_UP: '0' });
    try {
      const spec = await w.request('POST', '/v2/specialize', JSON.stringify({ filepath: pkg }));
      assert.equal(spec.status, 200, spec.text);
      assert.deepEqual(await w.request('GET', '/'), { status: 200, text: 'found' });
    } finally {
      await w.stop();
    }
    try {
      const modules = fs.readFileSync(loaded, 'utf8').split('\n');
      assert.ok(modules.includes('NativeModule http'), 'the list is of this worker');
      for (const m of ['fs/promises', 'os', 'crypto', 'internal/readline/interface', 'internal/fs/watchers']) {
        assert.ok(!modules.includes(`NativeModule ${m}`), `${m} was loaded`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
