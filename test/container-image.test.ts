// The Dockerfile cannot be built here (no container engine), so what would
// break the image is checked from the sources: everything it copies exists,
// the code it ships imports no dev dependency and nothing outside what it
// copies, and the files the server reads at run time are in it.
import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from './helpers/server.ts';

const dockerfile = fs.readFileSync(path.join(REPO, 'Dockerfile'), 'utf8');
const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8'));

/** `COPY <src>... <dest>` lines, as [sources, dest]. */
function copies(): Array<[string[], string]> {
  return [...dockerfile.matchAll(/^COPY\s+(.+)$/gm)].map((m) => {
    const parts = m[1].trim().split(/\s+/);
    return [parts.slice(0, -1), parts[parts.length - 1]];
  });
}

/** Source files the image runs: not tests, contract tests, test helpers or benchmarks. */
function shippedSources(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'testing' && e.name !== 'node_modules') out.push(...shippedSources(p));
    } else if (/\.ts$/.test(e.name) && !/\.(test|contract|bench)\.ts$/.test(e.name)) out.push(p);
  }
  return out;
}

function specifiers(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s+'([^']+)'/gm)) found.add(m[1]);
  for (const m of text.matchAll(/^\s*import\s+'([^']+)'/gm)) found.add(m[1]);
  for (const m of text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)) found.add(m[1]);
  return [...found];
}

describe('container image (Dockerfile)', () => {
  it('copies only what exists, and what the server reads at run time', () => {
    const sources = copies().flatMap(([s]) => s);
    for (const s of sources) assert.ok(fs.existsSync(path.join(REPO, s)), `COPY ${s}: no such file in the repository`);
    for (const needed of ['package.json', 'package-lock.json', 'bin', 'src', 'charts/flint/values.yaml']) {
      assert.ok(sources.includes(needed), `the image needs ${needed}`);
    }
    assert.match(dockerfile, /npm ci --omit=dev/);
    const ignored = fs.readFileSync(path.join(REPO, '.dockerignore'), 'utf8').split('\n');
    for (const needed of sources) assert.ok(!ignored.includes(needed), `.dockerignore drops ${needed}, which the image copies`);
  });

  it('ships code that imports Node built-ins, runtime dependencies and its own files only', () => {
    const builtins = new Set(builtinModules);
    const deps = new Set(Object.keys(pkg.dependencies));
    const srcDir = path.join(REPO, 'src');
    const problems: string[] = [];
    const seen = new Set<string>();
    const files = shippedSources(srcDir);
    assert.ok(files.length > 100, 'the sources were found');
    for (const file of [...files, path.join(REPO, 'bin', 'flint.js')]) {
      const rel = path.relative(REPO, file);
      for (const spec of specifiers(fs.readFileSync(file, 'utf8'))) {
        if (spec.startsWith('node:') || builtins.has(spec)) continue;
        if (spec.startsWith('.')) {
          const target = path.resolve(path.dirname(file), spec);
          const inside = target.startsWith(srcDir + path.sep) || target === path.join(REPO, 'package.json');
          if (!inside) problems.push(`${rel} imports ${spec}, outside what the image copies`);
          else if (/\.(test|contract)\.ts$/.test(target) || target.includes(`${path.sep}testing${path.sep}`)) problems.push(`${rel} imports test code ${spec}`);
          continue;
        }
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
        seen.add(name);
        if (!deps.has(name)) problems.push(`${rel} imports ${name}, which is not in package.json dependencies`);
      }
    }
    assert.deepEqual(problems, []);
    for (const known of ['fastify', 'pino', '@sinclair/typebox', 'ws']) assert.ok(seen.has(known), `the scan saw ${known} imported`);
  });
});
