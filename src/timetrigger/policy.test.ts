// When a time trigger runs, from its stored status: where a schedule starts
// (a new trigger, one already followed, a changed spec), the one run owed for
// due times missed while no scheduler ran, and the claim that keeps a due
// time from running twice.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseSchedule, rfc3339 } from '../api/cron.ts';
import type { TimeTrigger, TimeTriggerStatus } from '../api/kinds.ts';
import { claimed, functionPath, missedRun, startOf, unclaimed } from './policy.ts';

const at = (iso: string) => Date.parse(iso);

function trigger(generation: number, status?: TimeTriggerStatus): TimeTrigger {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'TimeTrigger',
    metadata: { name: 'tick', namespace: 'default', uid: 'u1', resourceVersion: '7', generation, creationTimestamp: '2024-03-01T10:00:00Z' },
    spec: { cron: '@every 1m', functionref: { type: 'name', name: 'hello' }, method: 'POST', subpath: '/' },
    status,
  };
}

describe('where a schedule starts', () => {
  it('a new trigger counts from its creation, and says so in its status', () => {
    const s = startOf(trigger(1, {}), at('2024-03-01T10:05:30Z'));
    assert.equal(s.anchor, at('2024-03-01T10:00:00Z'));
    assert.deepEqual(s.activate, { observedGeneration: 1, activeSince: '2024-03-01T10:00:00Z' });
  });

  it('a trigger already followed resumes after its last run', () => {
    const s = startOf(trigger(1, { observedGeneration: 1, activeSince: '2024-03-01T10:00:00Z', lastFireTime: '2024-03-01T10:03:00Z' }), at('2024-03-01T10:05:30Z'));
    assert.equal(s.anchor, at('2024-03-01T10:03:00Z'));
    assert.equal(s.activate, undefined);
    // Never run yet under this spec: from when it began to be followed.
    const since = startOf(trigger(2, { observedGeneration: 2, activeSince: '2024-03-01T10:04:00Z', lastFireTime: '2024-03-01T10:03:00Z' }), at('2024-03-01T10:05:30Z'));
    assert.equal(since.anchor, at('2024-03-01T10:04:00Z'));
  });

  it('a changed spec counts from now: runs missed under the old schedule are not owed', () => {
    const now = at('2024-03-01T10:05:30.250Z');
    const s = startOf(trigger(2, { observedGeneration: 1, activeSince: '2024-03-01T10:00:00Z', lastFireTime: '2024-03-01T10:01:00Z', lastOutcome: 'succeeded' }), now);
    assert.equal(s.anchor, now);
    assert.equal(s.activate?.observedGeneration, 2);
    assert.equal(s.activate?.activeSince, '2024-03-01T10:05:30.250Z');
    // The last run stays on show.
    assert.equal(s.activate?.lastFireTime, '2024-03-01T10:01:00Z');
  });
});

describe('missed runs', () => {
  const every = parseSchedule('@every 1m');

  it('due times that passed while no scheduler ran make one run, the latest', () => {
    assert.equal(rfc3339(missedRun(every, at('2024-03-01T10:03:00Z'), at('2024-03-01T10:07:30Z')) as number), '2024-03-01T10:07:00Z');
  });

  it('none when nothing fell due after the anchor', () => {
    assert.equal(missedRun(every, at('2024-03-01T10:07:00Z'), at('2024-03-01T10:07:59Z')), undefined);
    assert.equal(missedRun(every, at('2024-03-01T10:06:30Z'), at('2024-03-01T10:06:59Z')), undefined);
    // A trigger created between two due times owes nothing until the next.
    const s = startOf(trigger(1, {}), at('2024-03-01T10:00:40Z'));
    assert.equal(missedRun(every, s.anchor, at('2024-03-01T10:00:40Z')), undefined);
  });

  it('a cron expression the same way', () => {
    const hourly = parseSchedule('0 * * * *');
    assert.equal(rfc3339(missedRun(hourly, at('2024-03-01T07:00:00Z'), at('2024-03-01T10:20:00Z')) as number), '2024-03-01T10:00:00Z');
  });
});

describe('claims', () => {
  it('a due time is claimed once', () => {
    const due = at('2024-03-01T10:07:00Z');
    assert.equal(unclaimed(undefined, due), true);
    assert.equal(unclaimed({ lastFireTime: '2024-03-01T10:06:00Z' }, due), true);
    assert.equal(unclaimed({ lastFireTime: '2024-03-01T10:07:00Z' }, due), false);
    // A later run already claimed: an earlier due time is not run after it.
    assert.equal(unclaimed({ lastFireTime: '2024-03-01T10:08:00Z' }, due), false);
  });

  it("the claim clears the last run's outcome until this one's is known", () => {
    const s = claimed({ observedGeneration: 3, activeSince: 'x', lastFireTime: '2024-03-01T10:06:00Z', lastOutcome: 'failed', lastStatusCode: 500, lastDurationMs: 4, lastError: 'boom' }, at('2024-03-01T10:07:00Z'));
    assert.deepEqual(s, { observedGeneration: 3, activeSince: 'x', lastFireTime: '2024-03-01T10:07:00Z', lastOutcome: 'running' });
  });
});

describe('the path a run calls', () => {
  it("the router's internal function path, the namespace named whenever there is a sub-path", () => {
    assert.equal(functionPath('default', 'hello', '/'), '/flint-function/hello');
    assert.equal(functionPath('default', 'hello', undefined), '/flint-function/hello');
    assert.equal(functionPath('team', 'hello', '/'), '/flint-function/team/hello');
    assert.equal(functionPath('default', 'hello', '/report?full=1'), '/flint-function/default/hello/report?full=1');
    assert.equal(functionPath('team', 'hello', 'report'), '/flint-function/team/hello/report');
  });
});
