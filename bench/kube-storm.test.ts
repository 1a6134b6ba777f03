import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { type KubeStorm, kubeStormTable } from './kube-storm.ts';

const storm = (n: number, windowSeconds: number, callsMs: number[], podsStartedDuringBurst: number, failed = 0): KubeStorm => ({ n, windowSeconds, callsMs, failed, podsStartedDuringBurst, poolReadyMs: windowSeconds > 0 ? 2000 : 200 });

describe('kubernetes storm table', () => {
  it('gives each side its medians over rounds with min-max, and on over off round by round', () => {
    const t = kubeStormTable([
      storm(10, 300, [400, 600, 700], 2),
      storm(10, 0, [500, 2000, 4000], 10),
      storm(10, 0, [500, 2500, 4100], 10, 1),
      storm(10, 300, [450, 700, 1000], 4),
    ]);
    assert.match(t, /\| 10 \| on \| 650 \(600-700\) \| 850 \(700-1000\) \| 3 \(2-4\) \| 2000 \(2000-2000\) \| 0 \|/);
    assert.match(t, /\| 10 \| off \| 2250 \(2000-2500\) \| 4050 \(4000-4100\) \| 10 \(10-10\) \| 200 \(200-200\) \| 1 \|/);
    // Rounds paired in order: 600/2000 and 700/2500.
    assert.match(t, /\| 10 \| on \/ off, p50, round by round \| 0\.29x \(0\.28x-0\.30x\) \|/);
  });

  it('leaves out a side not measured, and the ratio with it', () => {
    const t = kubeStormTable([storm(20, 300, [1000], 0)]);
    assert.match(t, /\| 20 \| on \|/);
    assert.doesNotMatch(t, /\| off \||on \/ off/);
  });
});

describe('kubernetes storm arguments', () => {
  it('refuses rounds below 1 and sizes outside 1-100 before starting anything, naming what is allowed', () => {
    for (const args of [['--rounds', '0'], ['--rounds', 'two'], ['0'], ['101'], ['10', 'x']]) {
      const r = spawnSync(process.execPath, [path.join(import.meta.dirname, 'kube-storm.ts'), ...args], { encoding: 'utf8', timeout: 30_000 });
      assert.notEqual(r.status, 0, args.join(' '));
      assert.match(r.stderr, /usage: node bench\/kube-storm\.ts \[--rounds R\] \[N \.\.\.\] \(R ≥ 1, each N from 1 to 100\)/, args.join(' '));
    }
  });
});
