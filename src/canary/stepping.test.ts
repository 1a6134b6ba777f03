import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CanaryConfigSpec, FunctionReference } from '../api/kinds.ts';
import { decide, failureRate, rolledBackWeights, steppedWeights } from './stepping.ts';

const spec = (over: Partial<CanaryConfigSpec> = {}): CanaryConfigSpec => ({
  trigger: 'r',
  newfunction: 'v2',
  oldfunction: 'v1',
  weightincrement: 20,
  duration: '2s',
  failurethreshold: 10,
  ...over,
});
const weights = (v2: number, v1 = 100 - v2, more: Record<string, number> = {}): FunctionReference => ({
  type: 'function-weights',
  functionweights: { v1, v2, ...more },
});

describe('canary stepping', () => {
  it('takes the first step without judging: the new function had no traffic', () => {
    const d = decide(spec(), weights(0), { requests: 0, failures: 0 }, '2s');
    assert.equal(d.action, 'step');
    assert.deepEqual(d.action === 'step' && d.weights, { v1: 80, v2: 20 });
    assert.equal(d.action === 'step' && d.done, false);
    assert.equal(d.rate, undefined);
  });

  it('steps while the failure rate is at most the threshold, and succeeds when the old function has nothing left', () => {
    const d = decide(spec(), weights(40), { requests: 100, failures: 10 }, '2s');
    assert.equal(d.action, 'step');
    if (d.action !== 'step') return;
    assert.deepEqual(d.weights, { v1: 40, v2: 60 });
    assert.equal(d.rate, 10, 'exactly the threshold is not above it');
    assert.equal(d.requests, 100);
    assert.match(d.message, /'v2' at 60% \(failure rate 10% of 100 requests in the last 2s\)/);
    const last = decide(spec(), weights(90), { requests: 3, failures: 0 }, '2s');
    assert.ok(last.action === 'step' && last.done);
    assert.deepEqual(last.action === 'step' && last.weights, { v1: 0, v2: 100 }, 'the last step moves only what is left');
    assert.match(last.message, /^succeeded: all of 'v1''s traffic is on 'v2' \(100%\)/);
  });

  it('rolls back above the threshold, with the rate it saw', () => {
    const d = decide(spec(), weights(60), { requests: 40, failures: 19 }, '2s');
    assert.equal(d.action, 'rollback');
    if (d.action !== 'rollback') return;
    assert.deepEqual(d.weights, { v1: 100, v2: 0 });
    assert.equal(d.rate, 47.5);
    assert.equal(d.requests, 40);
    assert.match(d.message, /^failure rate 47\.5% \(19 of 40 requests to 'v2' answered 5xx in the last 2s\) is above the threshold of 10%: all its traffic is back on 'v1'$/);
  });

  it('a threshold of 0 rolls back on any failure; 100 never does', () => {
    assert.equal(decide(spec({ failurethreshold: 0 }), weights(20), { requests: 1000, failures: 1 }, '2s').action, 'rollback');
    assert.equal(decide(spec({ failurethreshold: 0 }), weights(20), { requests: 1000, failures: 0 }, '2s').action, 'step');
    assert.equal(decide(spec({ failurethreshold: 100 }), weights(20), { requests: 10, failures: 10 }, '2s').action, 'step');
  });

  it('holds the weights over an interval no request reached the new function in, or whose counts could not be read', () => {
    const none = decide(spec(), weights(20), { requests: 0, failures: 0 }, '2s');
    assert.equal(none.action, 'hold');
    assert.match(none.message, /'v2' at 20%: no request reached it in the last 2s/);
    assert.match(decide(spec(), weights(20), undefined, '2s').message, /could not be read/);
  });

  it('leaves the weights of other functions of the route alone, so they keep adding up to 100', () => {
    const d = decide(spec({ weightincrement: 50 }), weights(10, 30, { other: 60 }), { requests: 5, failures: 0 }, '2s');
    assert.ok(d.action === 'step' && d.done);
    assert.deepEqual(d.action === 'step' && d.weights, { v1: 0, v2: 40, other: 60 });
    assert.deepEqual(rolledBackWeights({ v1: 30, v2: 10, other: 60 }, 'v2', 'v1'), { v1: 40, v2: 0, other: 60 });
    assert.deepEqual(steppedWeights({ v1: 5, v2: 95 }, 'v2', 'v1', 20), { v1: 0, v2: 100 });
  });

  it('stops on a route that no longer carries the canary', () => {
    assert.match(decide(spec(), undefined, undefined, '2s').message, /HTTPTrigger 'r' no longer exists/);
    assert.match(decide(spec(), { type: 'name', name: 'v1' }, undefined, '2s').message, /no longer weighs functions/);
    const d = decide(spec(), { type: 'function-weights', functionweights: { v1: 100 } }, undefined, '2s');
    assert.equal(d.action, 'abort');
    assert.match(d.message, /no longer weighs function 'v2'/);
  });

  it('rounds the rate to two decimals', () => {
    assert.equal(failureRate({ requests: 3, failures: 1 }), 33.33);
    assert.equal(failureRate({ requests: 0, failures: 0 }), 0);
  });
});
