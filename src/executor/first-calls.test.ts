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
    calls.started('default/a');
    assert.equal(calls.count('default/node'), 1);
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
    calls.started('default/a');
    assert.equal(calls.note('default/a', 'default/node', 'v2', true), false, 'a called function is not counted again for the same code');
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

  it('counts nothing with a window of 0', () => {
    const calls = new ExpectedFirstCalls(0);
    assert.equal(calls.note('default/a', 'default/node', 'v1', true), false);
    assert.equal(calls.count('default/node'), 0);
  });
});
