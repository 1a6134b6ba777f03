import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ExpectedFirstCalls } from './first-calls.ts';

describe('ExpectedFirstCalls', () => {
  it('counts a function created or given new code while the server runs, per environment, until an instance starts', () => {
    const calls = new ExpectedFirstCalls(300_000, () => 1000);
    assert.equal(calls.note('default/a', 'default/node', 'v1', true), true);
    assert.equal(calls.note('default/b', 'default/node', 'v1', true), true);
    assert.equal(calls.note('default/c', 'default/go', 'v1', true), true);
    assert.equal(calls.count('default/node'), 2);
    assert.equal(calls.count('default/go'), 1);
    assert.equal(calls.count('other/node'), 0);
    assert.equal(calls.started('default/a', 'v1'), true);
    assert.equal(calls.count('default/node'), 1);
    assert.equal(calls.started('default/a', 'v1'), false, 'no longer counted');
    // New code for a function already called: its next call needs an instance of it again.
    assert.equal(calls.note('default/a', 'default/node', 'v2', true), true);
    assert.equal(calls.count('default/node'), 2);
  });

  it('does not count functions found at start, nor a change that keeps the code', () => {
    const calls = new ExpectedFirstCalls(300_000, () => 1000);
    assert.equal(calls.note('default/a', 'default/node', 'v1', false), false);
    assert.equal(calls.count('default/node'), 0);
    // The same version announced again (a build's status written to its package) is nothing new.
    assert.equal(calls.note('default/a', 'default/node', 'v1', true), false);
    assert.equal(calls.count('default/node'), 0);
    assert.equal(calls.note('default/a', 'default/node', 'v2', true), true);
    calls.started('default/a', 'v2');
    assert.equal(calls.note('default/a', 'default/node', 'v2', true), false, 'a called function is not counted again for the same code');
    // An instance started at code the executor's watch has not delivered yet: that code is not new when it arrives.
    calls.started('default/a', 'v3');
    assert.equal(calls.note('default/a', 'default/node', 'v3', true), false);
  });

  it('stops counting a function when the window passes, when it is deleted, and counts it in its new environment when moved', () => {
    let now = 0;
    const calls = new ExpectedFirstCalls(300_000, () => now);
    calls.note('default/a', 'default/node', 'v1', true);
    now = 299_999;
    assert.equal(calls.count('default/node'), 1);
    now = 300_000;
    assert.equal(calls.count('default/node'), 0);
    calls.note('default/b', 'default/node', 'v1', true);
    calls.forget('default/b');
    assert.equal(calls.count('default/node'), 0);
    // Forgotten entirely: the same code announced again counts (a function deleted and created again).
    assert.equal(calls.note('default/b', 'default/node', 'v1', true), true);
    assert.equal(calls.note('default/b', 'default/go', 'v2', true), true);
    assert.equal(calls.count('default/node'), 0);
    assert.equal(calls.count('default/go'), 1);
  });

  it('counts a function without code to start (its package missing or building) once the code lands', () => {
    const calls = new ExpectedFirstCalls(300_000, () => 1000);
    assert.equal(calls.note('default/a', 'default/node', 'v1:none', true, false), false);
    assert.equal(calls.count('default/node'), 0);
    assert.equal(calls.note('default/a', 'default/node', 'v1:sha', true, true), true);
    assert.equal(calls.count('default/node'), 1);
    // Its code removed again (the package deleted): no longer counted.
    assert.equal(calls.note('default/a', 'default/node', 'v1:-', true, false), false);
    assert.equal(calls.count('default/node'), 0);
  });

  it("expires entries in the order they were renewed, keeping each environment's count", () => {
    let now = 0;
    const calls = new ExpectedFirstCalls(100, () => now);
    calls.note('default/a', 'default/node', 'v1', true);
    now = 50;
    calls.note('default/b', 'default/go', 'v1', true);
    now = 60;
    // Renewed by new code: its window starts again.
    calls.note('default/a', 'default/node', 'v2', true);
    now = 149;
    assert.deepEqual([calls.count('default/node'), calls.count('default/go')], [1, 1]);
    now = 150;
    assert.deepEqual([calls.count('default/node'), calls.count('default/go')], [1, 0]);
    now = 160;
    assert.deepEqual([calls.count('default/node'), calls.count('default/go')], [0, 0]);
  });

  it('counts nothing with a window of 0', () => {
    const calls = new ExpectedFirstCalls(0);
    assert.equal(calls.note('default/a', 'default/node', 'v1', true), false);
    assert.equal(calls.count('default/node'), 0);
  });
});
