import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canaryIntervalProblem, parseDuration } from './duration.ts';

describe('Go durations', () => {
  it('reads what time.ParseDuration reads', () => {
    assert.equal(parseDuration('2m'), 120_000);
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('1.5s'), 1500);
    assert.equal(parseDuration('.5h'), 1_800_000);
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('2s500ms'), 2500);
    assert.equal(parseDuration('0'), 0);
  });

  it('refuses anything else', () => {
    for (const bad of ['', '2', '2d', '-1s', '+1s', 'm', '1 m', 's2', '1.2.3s', '2m ', 'two minutes']) assert.equal(parseDuration(bad), undefined, bad);
  });

  it('bounds a canary interval between 1s and 720h, naming the value', () => {
    assert.equal(canaryIntervalProblem('2s'), undefined);
    assert.equal(canaryIntervalProblem('720h'), undefined);
    assert.match(canaryIntervalProblem('500ms') ?? '', /'500ms' is shorter than the shortest interval, 1s/);
    assert.match(canaryIntervalProblem('721h') ?? '', /longer than the longest interval, 720h/);
    assert.match(canaryIntervalProblem('2d') ?? '', /'2d' is not a duration: .*units ns, us, ms, s, m, h/);
  });
});
