// runBuild against real builder scripts, in the real sandbox where this
// machine has bubblewrap.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { zipDirectory } from '../archive/index.ts';
import { rawZip } from '../archive/testing.ts';
import type { BuilderLaunch } from '../runtimes/index.ts';
import { sandboxAvailable } from '../sandbox/bwrap.ts';
import { usableCpus } from '../sandbox/cpu-affinity.ts';
import { EgressNetworks, egressUnavailableReason } from '../sandbox/egress.ts';
import { type BuildJob, runBuild } from './run-build.ts';


let dir: string;
let sandbox: 'bubblewrap' | 'none';
let builder: BuilderLaunch;
let sourceZip: string;
let n = 0;

function job(over: Partial<BuildJob> = {}): BuildJob & { lines: string[] } {
  const lines: string[] = [];
  n++;
  return {
    id: `test-build-${n}`,
    builder,
    command: ['build'],
    sourceFile: sourceZip,
    maxUnpackedBytes: 64 * 1024 * 1024,
    workDir: path.join(dir, `work-${n}`),
    cacheDir: path.join(dir, 'cache'),
    sandbox,
    timeoutMs: 30_000,
    memoryMB: 512,
    onLine: (l) => lines.push(l),
    lines,
    ...over,
  };
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-build-'));
  sandbox = (await sandboxAvailable()) ? 'bubblewrap' : 'none';
  const bdir = path.join(dir, 'builder');
  fs.mkdirSync(bdir);
  // A builder that shows what it was given and copies the source with a marker.
  fs.writeFileSync(
    path.join(bdir, 'build'),
    [
      '#!/bin/sh',
      'set -eu',
      'echo "src=$SRC_PKG deploy=$DEPLOY_PKG cache=$FLINT_BUILD_CACHE pwd=$(pwd)"',
      'echo "to stderr" >&2',
      'echo cached >> "$FLINT_BUILD_CACHE/runs"',
      'if [ -d "$SRC_PKG" ]; then cp -R "$SRC_PKG" "$DEPLOY_PKG"; else mkdir "$DEPLOY_PKG"; cp "$SRC_PKG" "$DEPLOY_PKG/"; fi',
      'echo built > "$DEPLOY_PKG/marker"',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  fs.writeFileSync(path.join(bdir, 'hang'), '#!/bin/sh\necho hanging\nsleep 600\n', { mode: 0o755 });
  fs.writeFileSync(path.join(bdir, 'nothing'), '#!/bin/sh\necho did nothing\n', { mode: 0o755 });
  fs.writeFileSync(path.join(bdir, 'escape'), '#!/bin/sh\necho x > /usr/flint-escape || echo "cannot write /usr"\necho x > "$HOME/../flint-escape" 2>/dev/null || true\nmkdir -p "$DEPLOY_PKG"\n', { mode: 0o755 });
  builder = { dir: bdir, binaries: () => [] };
  const src = path.join(dir, 'src');
  fs.mkdirSync(path.join(src, 'lib'), { recursive: true });
  fs.writeFileSync(path.join(src, 'index.js'), 'module.exports = () => "hi"\n');
  fs.writeFileSync(path.join(src, 'lib', 'util.js'), 'exports.x = 1\n');
  sourceZip = path.join(dir, 'src.zip');
  await zipDirectory(src, sourceZip);
});

after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('runBuild', () => {
  it('runs the builder on the unpacked source and returns what it wrote at DEPLOY_PKG', async () => {
    const j = job();
    const r = await runBuild(j);
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.ok(r.ok);
    assert.equal(fs.readFileSync(path.join(r.deployPath, 'marker'), 'utf8'), 'built\n');
    assert.equal(fs.readFileSync(path.join(r.deployPath, 'lib', 'util.js'), 'utf8'), 'exports.x = 1\n');
    const expected = sandbox === 'bubblewrap' ? 'src=/packages/src deploy=/packages/deploy cache=/flint/cache pwd=/packages/src' : `src=${j.workDir}/src deploy=${j.workDir}/deploy`;
    assert.ok(j.lines[0].startsWith(expected), j.lines[0]);
    assert.ok(j.lines.includes('to stderr'));
    // The cache outlives the build.
    await runBuild(job());
    assert.equal(fs.readFileSync(path.join(dir, 'cache', 'runs'), 'utf8'), 'cached\ncached\n');
  });

  it('runs the build on the CPUs it is given', async () => {
    const cpu = String(usableCpus().at(-1));
    const j = job({ command: ['sh', '-c', 'grep Cpus_allowed_list /proc/self/status; mkdir "$DEPLOY_PKG"'], cpus: cpu });
    assert.ok((await runBuild(j)).ok, j.lines.join('\n'));
    assert.ok(j.lines.some((l) => new RegExp(`^Cpus_allowed_list:\\s*${cpu}$`).test(l)), j.lines.join('\n'));
  });

  it('gives a sandboxed build a network namespace of its own, or runs it offline saying why', async (t) => {
    if (sandbox !== 'bubblewrap') {
      t.skip('unsandboxed builds share the host network');
      return;
    }
    const interfaces = ['sh', '-c', 'sed -n "3,\\$p" /proc/net/dev | cut -d: -f1 | tr -d " " | sort | tr "\\n" " "; echo; mkdir "$DEPLOY_PKG"'];
    const stopped = new EgressNetworks({ subnet: '10.231.0.0/16' });
    await stopped.stop();
    const offline = job({ command: interfaces, egress: stopped });
    assert.ok((await runBuild(offline)).ok, offline.lines.join('\n'));
    assert.match(offline.lines[0], /^flint: the build runs without network: .*(stopping|CAP_NET_ADMIN|not installed)/);
    assert.equal(offline.lines[1], 'lo ');
    if (egressUnavailableReason()) return;
    const egress = new EgressNetworks({ subnet: '10.231.0.0/16' });
    try {
      const online = job({ command: interfaces, egress });
      assert.ok((await runBuild(online)).ok, online.lines.join('\n'));
      assert.equal(online.lines[0], 'eth0 lo ');
      assert.deepEqual(egress.live, [], 'the namespace went with the build');
    } finally {
      await egress.stop();
    }
  });

  it('gives a single-file source as SRC_PKG itself', async () => {
    const file = path.join(dir, 'hello.go');
    fs.writeFileSync(file, 'package main\n');
    const j = job({ sourceFile: file });
    const r = await runBuild(j);
    assert.ok(r.ok, JSON.stringify(r));
    assert.ok(j.lines[0].includes('src=') && j.lines[0].split(' ')[0].endsWith('/src/source'), j.lines[0]);
    assert.equal(fs.readFileSync(path.join(r.deployPath, 'marker'), 'utf8'), 'built\n');
  });

  it('reports a failing command with its exit code', async () => {
    const j = job({ command: ['sh', '-c', 'echo broken >&2; exit 3'] });
    const r = await runBuild(j);
    assert.deepEqual(r, { ok: false, reason: "the build command 'sh -c echo broken >&2; exit 3' exited with code 3" });
    assert.deepEqual(j.lines, ['broken']);
  });

  it('stops a build that runs past its time limit', async () => {
    const j = job({ command: ['hang'], timeoutMs: 1500 });
    const r = await runBuild(j);
    assert.deepEqual(r, { ok: false, reason: 'the build did not finish within 2 s and was stopped' });
    assert.deepEqual(j.lines, ['hanging']);
  });

  it('fails a build that writes nothing, and one whose command does not exist', async () => {
    assert.deepEqual(await runBuild(job({ command: ['nothing'] })), { ok: false, reason: 'the build succeeded but wrote nothing at DEPLOY_PKG' });
    const r = await runBuild(job({ command: ['no-such-command'] }));
    assert.equal(r.ok, false);
  });

  it('refuses a source that is an unsafe zip before anything runs', async () => {
    const bad = path.join(dir, 'bad.zip');
    fs.writeFileSync(bad, rawZip('../evil.txt', Buffer.from('x')));
    await assert.rejects(runBuild(job({ sourceFile: bad })), { code: 'FLINT_ERR_BAD_ARCHIVE' });
    assert.equal(fs.existsSync(path.join(dir, 'evil.txt')), false);
  });

  it('keeps the build inside its sandbox', async (t) => {
    if (sandbox === 'none') return t.skip('no bubblewrap here');
    const j = job({ command: ['escape'] });
    const r = await runBuild(j);
    assert.ok(r.ok, JSON.stringify(r));
    assert.ok(j.lines.includes('cannot write /usr'), j.lines.join('\n'));
    assert.equal(fs.existsSync('/usr/flint-escape'), false);
  });
});
