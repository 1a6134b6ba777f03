// In the sandbox the runtime's server sees its own directory (read-only at
// /flint/runtime), /usr, and the packages launch.ts binds beside it (ws, at
// /flint/node_modules/ws); nothing else of the host's node_modules. So its
// sources may import only Node's built-ins, files of the runtime directory
// and ws; ws must bring no package of its own, since none would be bound;
// and a worker in the real sandbox must load ws from that bind.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startWorker, type WorkerHandle } from '../../executor/process/worker-process.ts';
import { sandboxAvailable } from '../../sandbox/bwrap.ts';
import { RUNTIME_PACKAGES, runtimePackageDirs } from './launch.ts';
import { clientFrame, OP, rawUpgrade } from './ws-testing.ts';

const RUNTIME_DIR = import.meta.dirname;
const REPO = path.resolve(RUNTIME_DIR, '..', '..', '..');
const readJson = (p: string) => JSON.parse(fs.readFileSync(p, 'utf8'));
/** A regression that leaves a wait unanswered fails its own test instead of hanging the run. */
const BOUNDED = { timeout: 60_000 };

/** Sources the worker runs: not tests, test helpers or the host-side launch description. */
function workerSources(dir = RUNTIME_DIR, rel = ''): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const name = path.posix.join(rel, e.name);
    if (e.isDirectory()) out.push(...workerSources(dir, name));
    else if (name.endsWith('.ts') && !/(^|\/|-)testing\.ts$|\.test\.ts$/.test(name) && name !== 'launch.ts') out.push(name);
  }
  return out.sort();
}

/** The package a bare specifier names (`ws`, `ws/lib/x`, `@scope/name/x`). */
const packageOf = (spec: string) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);

describe('node runtime: what its server loads reaches the sandbox', () => {
  it('ws is the one package the runtime imports, and the one launch.ts binds', () => {
    // Another would be one more package to keep free of dependencies and to bind into every sandbox: a decision, not a drift.
    assert.deepEqual([...RUNTIME_PACKAGES], ['ws']);
  });

  it('imports only Node built-ins, files inside the runtime directory and ws', () => {
    const files = workerSources();
    assert.ok(files.includes('server.ts') && files.includes('websocket.ts'), `the sources were found: ${files.join(' ')}`);
    const builtins = new Set(builtinModules);
    const allowed = new Set<string>(RUNTIME_PACKAGES);
    const problems: string[] = [];
    const packages = new Set<string>();
    for (const rel of files) {
      const text = fs.readFileSync(path.join(RUNTIME_DIR, rel), 'utf8');
      const pattern = /^\s*(?:import|export)\s[^;]*?\sfrom\s+'([^']+)'|^\s*import\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)|\brequire\(\s*'([^']+)'\s*\)/gm;
      for (const m of text.matchAll(pattern)) {
        const spec = m[1] ?? m[2] ?? m[3] ?? m[4];
        if (spec.startsWith('node:') || builtins.has(spec)) continue;
        if (spec.startsWith('.') || spec.startsWith('/')) {
          const target = path.resolve(path.dirname(path.join(RUNTIME_DIR, rel)), spec);
          if (!target.startsWith(RUNTIME_DIR + path.sep)) problems.push(`${rel} imports ${spec}, outside the runtime directory`);
          continue;
        }
        packages.add(packageOf(spec));
        if (!allowed.has(packageOf(spec))) problems.push(`${rel} imports ${spec}, a package the sandbox does not have`);
      }
    }
    assert.deepEqual(problems, []);
    assert.ok(packages.has('ws'), 'the scan saw ws imported');
  });

  it('ws is a pinned runtime dependency with no package of its own', () => {
    const pkg = readJson(path.join(REPO, 'package.json'));
    const lock = readJson(path.join(REPO, 'package-lock.json'));
    for (const [name, dir] of runtimePackageDirs()) {
      // Not a dev dependency: the image installs with --omit=dev.
      const pin: string | undefined = pkg.dependencies?.[name];
      assert.match(pin ?? '', /^\d+\.\d+\.\d+$/, `${name} is pinned to one version in package.json dependencies`);
      assert.equal(pkg.devDependencies?.[name], undefined, `${name} is not also a dev dependency`);
      const manifest = readJson(path.join(dir, 'package.json'));
      assert.equal(manifest.name, name);
      assert.equal(manifest.version, pin, `the ${name} this process resolves (${dir}) is the pinned one: run npm ci`);
      // A dependency would be missing from the sandbox, which binds this one directory.
      assert.deepEqual(Object.keys(manifest.dependencies ?? {}), [], `${name} has dependencies of its own`);
      assert.deepEqual(Object.keys(manifest.optionalDependencies ?? {}), [], `${name} has optional dependencies of its own`);
      // ws's optional add-ons (bufferutil, utf-8-validate) would reach an
      // unsandboxed worker but not a sandboxed one: none are installed, so both run the same code.
      for (const peer of Object.keys(manifest.peerDependencies ?? {})) {
        assert.equal(manifest.peerDependenciesMeta?.[peer]?.optional, true, `${name}'s peer dependency ${peer} is optional`);
        assert.equal(lock.packages[`node_modules/${peer}`], undefined, `the lockfile installs ${name}'s optional ${peer}`);
      }
    }
  });
});

describe('node runtime: ws in the real sandbox', async () => {
  const usable = await sandboxAvailable();
  const skip = usable ? false : 'bubblewrap cannot build a sandbox on this machine (missing, or user namespaces are disabled)';
  let root = '';
  let worker: WorkerHandle | undefined;
  const output: string[] = [];

  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-rt-ws-'));
  });
  after(async () => {
    await worker?.kill();
    fs.rmSync(root, { recursive: true, force: true });
  });

  // Answers with where its worker's ws was loaded from, as Node's module cache
  // tells, and whether that place can be written to.
  const FUNCTION = `
const fs = require('node:fs');
module.exports = (ws) => {
  ws.on('message', () => {
    let write = 'ok';
    try { fs.writeFileSync('/flint/node_modules/ws/new-file', 'x'); } catch (e) { write = e.code; }
    const loaded = Object.keys(require.cache).filter((f) => f.includes('/ws/')).sort();
    ws.send(JSON.stringify({ loaded, write, version: JSON.parse(fs.readFileSync('/flint/node_modules/ws/package.json', 'utf8')).version }));
  });
};`;

  it('a sandboxed worker loads ws from its read-only bind and takes a WebSocket through it', { skip, ...BOUNDED }, async () => {
    const id = `rt-ws-${process.pid}`;
    worker = await startWorker({
      id,
      runtime: 'node',
      instanceDir: path.join(root, id),
      sandbox: 'bubblewrap',
      allowNetwork: false,
      memoryMB: 128,
      onOutput: (line) => output.push(line),
    });
    fs.writeFileSync(path.join(worker.hostDirs.userfunc, 'deployarchive'), FUNCTION, { mode: 0o444 });
    await worker.specialize({ filepath: path.posix.join(worker.sandboxDirs.userfunc, 'deployarchive') }, 10_000);
    const peer = rawUpgrade(worker.socketPath, { path: '/' });
    try {
      const head = await peer.head();
      assert.equal(head.status, 101, `the upgrade was accepted (worker output: ${output.join('\n')})`);
      peer.send(clientFrame(OP.TEXT, 'where'));
      const frame = await peer.frame();
      assert.equal(frame.opcode, OP.TEXT);
      const seen = JSON.parse(frame.payload.toString('utf8'));
      assert.ok(seen.loaded.includes('/flint/node_modules/ws/lib/websocket.js'), `ws was loaded from the bind: ${seen.loaded.join(' ')}`);
      assert.ok(
        seen.loaded.every((f: string) => f.startsWith('/flint/node_modules/ws/')),
        `every ws module came from the bind: ${seen.loaded.join(' ')}`,
      );
      assert.equal(seen.version, readJson(path.join(REPO, 'package.json')).dependencies.ws);
      assert.equal(seen.write, 'EROFS');
    } finally {
      peer.socket.destroy();
    }
  });
});
