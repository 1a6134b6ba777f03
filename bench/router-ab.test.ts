import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { type Round, summarize } from './router-ab.ts';

const side = (rps: number, serverUs: number, serverUserUs: number, workersUs: number) => ({ rps, serverUs, serverUserUs, workersUs });

describe('router A/B summary', () => {
  it('gives B over A per round for each figure, with the median and range over rounds', () => {
    const rounds: Round[] = [
      { a: side(1000, 100, 60, 50), b: side(1100, 90, 50, 50) },
      { a: side(1000, 100, 60, 50), b: side(1200, 80, 45, 55) },
      { a: side(2000, 50, 30, 40), b: side(1800, 55, 36, 40) },
    ];
    const byName = Object.fromEntries(summarize(rounds).map((f) => [f.name, f]));
    assert.deepEqual(byName['router CPU per request'].ratios, [0.9, 0.8, 1.1]);
    assert.equal(byName['router CPU per request'].median, 0.9);
    assert.equal(byName['router CPU per request'].min, 0.8);
    assert.equal(byName['router CPU per request'].max, 1.1);
    assert.equal(byName['req/s'].median, 1.1);
    assert.equal(byName["workers' CPU per request (control)"].max, 1.1);
    assert.ok(Math.abs(byName['router user-space CPU per request'].median - 50 / 60) < 1e-9);
  });

  it('leaves out a round where a side served nothing, rather than report an infinite ratio', () => {
    const rounds: Round[] = [
      { a: side(1000, 100, 60, 50), b: side(1000, 90, 50, 50) },
      { a: side(0, 0, 0, 0), b: side(1000, 90, 50, 50) },
    ];
    const cpu = summarize(rounds).find((f) => f.name === 'router CPU per request');
    assert.deepEqual(cpu?.ratios, [0.9]);
  });

  it('refuses bad arguments with a message naming them and a non-zero exit, before it starts anything', () => {
    const tool = path.join(import.meta.dirname, 'router-ab.ts');
    for (const [args, said] of [
      [[], /usage: node bench\/router-ab\.ts <commit>/],
      [['HEAD', '--rounds', '0'], /--rounds must be a whole number above 0, not "0"/],
      [['HEAD', '--seconds', '1.5'], /--seconds must be a whole number above 0, not "1\.5"/],
      [['HEAD', '--connections', 'many'], /--connections must be a whole number above 0, not "many"/],
    ] as const) {
      const r = spawnSync(process.execPath, [tool, ...args], { encoding: 'utf8', timeout: 30_000 });
      assert.equal(r.status, 1, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, said);
    }
  });
});
