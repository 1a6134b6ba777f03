import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { BUNDLE_FILE, RUNTIME_DIR, renderNodeRuntimeBundle } from '../../../scripts/build-node-runtime.ts';
import { BUNDLE_NAME, bundleHeader, bundleIsFresh } from './bundle.ts';

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

  it('the bundle serves: specialized with an ES module that uses top-level await, it answers', async () => {
    const dir = tmpDir();
    const sock = path.join(dir, 'w.sock');
    const fn = path.join(dir, 'fn.mjs');
    fs.writeFileSync(fn, 'const v = await Promise.resolve("tla");\nexport default async () => ({ status: 200, body: v });\n');
    const child = spawn(process.execPath, [BUNDLE_FILE], { env: { ...process.env, FLINT_SOCKET: sock, FLINT_EXIT_ON_STDIN_EOF: '1' }, stdio: ['pipe', 'ignore', 'inherit'] });
    const request = (method: string, p: string, body?: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = http.request({ socketPath: sock, method, path: p, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    try {
      for (let i = 0; i < 400 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 25));
      const spec = await request('POST', '/v2/specialize', JSON.stringify({ filepath: fn }));
      assert.equal(spec.status, 200, spec.text);
      const r = await request('GET', '/');
      assert.deepEqual(r, { status: 200, text: 'tla' });
    } finally {
      child.stdin!.end();
      await new Promise((r) => child.once('exit', r));
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
