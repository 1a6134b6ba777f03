import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { sandboxAvailable } from '../src/sandbox/bwrap.ts';
import type { StormResult } from './results.ts';
import { forkOnce, prepareRuntimes, STORM_RUNTIMES, type StormRuntime, stormArgs, stormBench, stormRatio, stormRows } from './storm.ts';

const result = (round: number, p50CallMs: number, p50ForkMs: number, more: Partial<StormResult> = {}): StormResult => ({
  runtime: 'node',
  n: 3,
  round,
  burst: 'first',
  calls: [p50CallMs / 2, p50CallMs, p50CallMs * 2].map((ms) => ms * 1000),
  forks: [p50ForkMs / 2, p50ForkMs, p50ForkMs * 2].map((ms) => ms * 1000),
  failed: 0,
  cpuMsPerCall: 60 + round,
  cpuMsPerFork: 40,
  ...more,
});

describe('storm rows', () => {
  it('reports the round with the median ratio, and the range of all rounds', () => {
    const rows = stormRows([result(0, 300, 200), result(1, 100, 200), result(2, 200, 200)]);
    assert.equal(rows.length, 1);
    assert.equal(rows[0][1], '1.00x (0.50-1.50x over 3 rounds)');
    assert.match(rows[0][2], /^median round: storm p50 200 ms, .* machine CPU per call 62 ms, per fork 40 ms$/);
    assert.equal(stormRatio(result(0, 300, 200)), 1.5);
  });

  it('keeps runtimes, sizes and bursts apart, and counts the failures of every round', () => {
    const rows = stormRows([
      result(0, 100, 100),
      result(0, 10, 100, { burst: 'next' }),
      result(0, 100, 100, { runtime: 'python', forkName: 'python3' }),
      result(1, 100, 100, { failed: 2, firstError: 'first call of f: 503' }),
    ]);
    assert.equal(rows.length, 3);
    assert.equal(rows[0][1], '2 failed');
    assert.match(rows[0][2], /first error: first call of f: 503/);
    assert.equal(rows[1][1], '0.10x');
    assert.match(rows[1][0], /the next burst/);
    assert.match(rows[2][0], /3 python functions .* python3 forks/);
  });

  it('takes the median of the rounds that measured something when one failed whole', () => {
    const rows = stormRows([result(0, 100, 100), result(1, 0, 100, { calls: [], failed: 3, firstError: 'boom' }), result(2, 300, 100)]);
    assert.equal(rows[0][1], '3 failed');
    assert.match(rows[0][2], /^median round: storm p50 100 ms/);
  });

  it('sets the same round\'s forks in the sandbox beside the plain ones, when there are some', () => {
    const inSandbox = (p50Ms: number) => ({ sandboxedForks: [p50Ms / 2, p50Ms, p50Ms * 2].map((ms) => ms * 1000), cpuMsPerSandboxedFork: 55 });
    const rows = stormRows([result(0, 300, 200, inSandbox(250)), result(1, 100, 200, inSandbox(200)), result(2, 200, 200, inSandbox(100))]);
    assert.equal(rows[0][1], '1.00x (0.50-1.50x over 3 rounds)', 'the target stays the plain forks');
    // The median round's (by the plain ratio), and the sandboxed ratio's own range over the rounds.
    assert.match(rows[0][2], /; forks in Flint's sandbox p50 100 ms, p99 \d+ ms, machine CPU per fork 55 ms \(storm \/ sandboxed forks 2\.00x, 0\.50-2\.00x over 3 rounds\)$/);
    // Sandboxed forks that failed are said, and the storm and the plain forks still count.
    const failedRows = stormRows([result(0, 300, 200, { sandboxedError: 'bwrap: Creating new namespace failed' })]);
    assert.equal(failedRows[0][1], '1.50x');
    assert.match(failedRows[0][2], /; forks in Flint's sandbox failed: bwrap: Creating new namespace failed$/);
    // Without the sandbox (executor.sandbox=none) there are none, and the row does not mention them.
    assert.doesNotMatch(stormRows([result(0, 300, 200)])[0][2], /sandbox/);
  });

  it('names each runtime\'s own baseline', () => {
    const rows = stormRows([result(0, 100, 100, { runtime: 'go', forkName: STORM_RUNTIMES.go.forkName }), result(0, 100, 100, { runtime: 'python', forkName: 'python3' }), result(0, 100, 100)]);
    assert.match(rows[0][0], /3 go functions .* 3 concurrent go \(a plain net\/http program\) forks$/);
    assert.match(rows[1][0], /3 python functions .* 3 concurrent python3 forks$/);
    // Without a name of its own, the runtime's.
    assert.match(rows[2][0], /3 node functions .* 3 concurrent node forks$/);
    assert.deepEqual(Object.keys(STORM_RUNTIMES), ['node', 'python', 'go']);
  });

  it('gives a runtime that cannot be made ready a row saying why, and makes the others ready', async () => {
    const prepared: string[] = [];
    const fake = (name: 'node' | 'python' | 'go', fail?: string): StormRuntime => ({
      name,
      image: `flint/${name}-env`,
      forkName: name,
      async prepare(sandbox) {
        prepared.push(`${name} ${sandbox}`);
        if (fail) throw new Error(fail);
      },
      deploy: async () => {},
      forkArgv: () => [],
      forkBinaries: () => [],
    });
    const runtimes = [fake('go', 'no Go toolchain'), fake('node'), fake('python', 'no python here')];
    const { ready, skipped } = await prepareRuntimes(runtimes, 'none');
    assert.deepEqual(prepared, ['go none', 'node none', 'python none']);
    assert.deepEqual(
      ready.map((r) => r.name),
      ['node'],
    );
    assert.deepEqual(skipped, [
      ['cold-start storms, go', 'skipped', 'no Go toolchain', '≤ 1.0x'],
      ['cold-start storms, python', 'skipped', 'no python here', '≤ 1.0x'],
    ]);
    // stormBench puts the skipped rows after the measured ones (none here: no sizes, so no server starts).
    const { rows, results } = await stormBench('none', [], runtimes);
    assert.deepEqual(results, []);
    assert.deepEqual(rows, skipped);
  });

  it('refuses a bad size or an unknown runtime with a message naming it, and a non-zero exit before anything starts', () => {
    assert.deepEqual(stormArgs([], undefined), { sizes: [20, 100] });
    assert.deepEqual(stormArgs(['5'], 'go,node'), { sizes: [5], runtimes: [STORM_RUNTIMES.go, STORM_RUNTIMES.node] });
    for (const [argv, env, said] of [
      [['0'], undefined, /a storm size must be a whole number above 0, not "0"/],
      [['20', 'many'], undefined, /not "many"/],
      [['1.5'], undefined, /not "1\.5"/],
      [[], 'node,ruby', /STORM_RUNTIMES: no runtime "ruby" \(node, python, go\)/],
      [[], '__proto__', /no runtime "__proto__"/],
    ] as const) {
      const r = stormArgs([...argv], env);
      assert.ok('refused' in r, `${argv.join(' ')} ${env}`);
      assert.match(r.refused, said);
    }
    const tool = path.join(import.meta.dirname, 'storm.ts');
    const r = spawnSync(process.execPath, [tool, '20'], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, STORM_RUNTIMES: 'cobol' } });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /^STORM_RUNTIMES: no runtime "cobol"/);
  });
});

describe('storm forks', () => {
  it('runs a fork plainly, and inside the sandbox where the socket directory is its one writable place', { timeout: 60_000 }, async (t) => {
    const dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'storm-fork-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const since = process.hrtime.bigint();
    assert.ok((await forkOnce(STORM_RUNTIMES.node, dir, 'plain', since, false)) > 0);
    if (!(await sandboxAvailable())) return t.skip('bubblewrap cannot build a sandbox on this machine');
    assert.ok((await forkOnce(STORM_RUNTIMES.node, dir, 'sandboxed', since, true)) > 0);
    // Inside, a host binary outside /usr is only where the sandbox shows it: a fork that does not ask for its binary fails to start.
    if (process.execPath.startsWith('/usr/')) return;
    const lost: StormRuntime = { ...STORM_RUNTIMES.node, forkBinaries: () => [] };
    await assert.rejects(forkOnce(lost, dir, 'lost', since, true), /exited with/);
  });
});
