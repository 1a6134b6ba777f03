// Time-trigger schedules: the due times of each accepted form, and the
// reasons a bad expression is refused with; and the TimeTrigger kind's
// validation, which refuses such an expression naming spec.cron.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextDueTimes, parseEvery, parseSchedule, rfc3339, scheduleProblem } from './cron.ts';
import { isFlintError } from './errors.ts';
import type { TimeTrigger } from './kinds.ts';
import { validateResource } from './validate.ts';

const at = (iso: string) => Date.parse(iso);
const due = (expr: string, from: string, n = 3) => nextDueTimes(parseSchedule(expr), at(from), n).map(rfc3339);

describe('schedules', () => {
  it('reads 5-field expressions in UTC, minute first', () => {
    assert.deepEqual(due('*/15 * * * *', '2024-03-01T10:07:30Z'), ['2024-03-01T10:15:00Z', '2024-03-01T10:30:00Z', '2024-03-01T10:45:00Z']);
    assert.deepEqual(due('30 2 * * 1', '2024-03-01T00:00:00Z', 2), ['2024-03-04T02:30:00Z', '2024-03-11T02:30:00Z']);
    // Day of month or day of week, as Vixie cron (and Fission's robfig/cron) read both restricted.
    assert.deepEqual(due('0 0 1 * 0', '2024-03-01T12:00:00Z', 2), ['2024-03-03T00:00:00Z', '2024-03-10T00:00:00Z']);
  });

  it('reads 6-field expressions with seconds first', () => {
    assert.deepEqual(due('*/20 * * * * *', '2024-03-01T10:00:05Z'), ['2024-03-01T10:00:20Z', '2024-03-01T10:00:40Z', '2024-03-01T10:01:00Z']);
    assert.deepEqual(due('* * * * * *', '2024-03-01T10:00:00.500Z', 2), ['2024-03-01T10:00:01Z', '2024-03-01T10:00:02Z']);
  });

  it('reads the nicknames', () => {
    assert.deepEqual(due('@hourly', '2024-03-01T10:30:00Z', 1), ['2024-03-01T11:00:00Z']);
    assert.deepEqual(due('@daily', '2024-03-01T10:30:00Z', 1), ['2024-03-02T00:00:00Z']);
    assert.deepEqual(due('@midnight', '2024-03-01T10:30:00Z', 1), ['2024-03-02T00:00:00Z']);
    assert.deepEqual(due('@weekly', '2024-03-01T10:30:00Z', 1), ['2024-03-03T00:00:00Z']);
    assert.deepEqual(due('@monthly', '2024-03-01T10:30:00Z', 1), ['2024-04-01T00:00:00Z']);
    assert.deepEqual(due('@yearly', '2024-03-01T10:30:00Z', 1), ['2025-01-01T00:00:00Z']);
    assert.deepEqual(due('@annually', '2024-03-01T10:30:00Z', 1), ['2025-01-01T00:00:00Z']);
  });

  it("reads Fission's @every as whole multiples of the duration since the epoch", () => {
    assert.deepEqual(due('@every 1m', '2024-03-01T10:00:30Z'), ['2024-03-01T10:01:00Z', '2024-03-01T10:02:00Z', '2024-03-01T10:03:00Z']);
    assert.deepEqual(due('@every 1h30m', '2024-03-01T00:00:00Z', 2), ['2024-03-01T01:30:00Z', '2024-03-01T03:00:00Z']);
    assert.deepEqual(due('@every 1s', '2024-03-01T00:00:00.200Z', 2), ['2024-03-01T00:00:01Z', '2024-03-01T00:00:02Z']);
    assert.equal(parseEvery('1.5m'), 90_000);
    assert.equal(parseEvery('2000ms'), 2000);
    assert.equal(parseEvery('1h0m30s'), 3_630_000);
  });

  it('says which due time is the latest at or before a moment', () => {
    const s = parseSchedule('0 * * * *');
    assert.equal(rfc3339(s.latest(at('2024-03-01T10:00:00Z')) as number), '2024-03-01T10:00:00Z');
    assert.equal(rfc3339(s.latest(at('2024-03-01T10:59:59Z')) as number), '2024-03-01T10:00:00Z');
    const e = parseSchedule('@every 10s');
    assert.equal(rfc3339(e.latest(at('2024-03-01T10:00:19.999Z')) as number), '2024-03-01T10:00:10Z');
    assert.equal(rfc3339(e.latest(at('2024-03-01T10:00:20Z')) as number), '2024-03-01T10:00:20Z');
  });

  it('refuses bad expressions with the reason', () => {
    const cases: Array<[string, RegExp]> = [
      ['', /a schedule is required/],
      ['* * *', /expected 5 fields .*got 3 fields/],
      ['0 0 * * * * 2030', /got 7 fields/],
      ['61 * * * *', /minute/i],
      ['* 24 * * *', /hour/i],
      ['* * * 13 *', /month/i],
      ['0 0 30 2 *', /never matches a date/],
      ['@often', /unknown nickname '@often'/],
      ['@reboot', /reboot/],
      ['@every', /needs a duration/],
      ['@every soon', /'soon' is not a duration/],
      ['@every 500ms', /shorter than the shortest interval, 1s/],
      ['@every 1.5s', /not a whole number of seconds/],
      ['@every 1m junk', /not a duration/],
    ];
    for (const [expr, why] of cases) assert.match(scheduleProblem(expr) ?? 'accepted', why, expr);
    assert.equal(scheduleProblem('*/5 * * * *'), undefined);
  });
});

describe('TimeTrigger validation', () => {
  const tt = (spec: Record<string, unknown>) => ({
    apiVersion: 'fission.io/v1',
    kind: 'TimeTrigger',
    metadata: { name: 'tick' },
    spec: { cron: '@every 1m', functionref: { type: 'name', name: 'hello' }, ...spec },
  });
  const refusal = (input: unknown) => {
    try {
      validateResource('TimeTrigger', input);
    } catch (err) {
      assert.ok(isFlintError(err) && err.code === 'FLINT_ERR_VALIDATION', String(err));
      return { field: err.field, message: err.message };
    }
    assert.fail('accepted');
  };

  it("applies Fission's defaults: POST and subpath /", () => {
    const v = validateResource('TimeTrigger', tt({})) as TimeTrigger;
    assert.equal(v.apiVersion, 'flint.dev/v1');
    assert.equal(v.spec.method, 'POST');
    assert.equal(v.spec.subpath, '/');
    const blank = validateResource('TimeTrigger', tt({ method: '', subpath: 'report' })) as TimeTrigger;
    assert.equal(blank.spec.method, 'POST');
    assert.equal(blank.spec.subpath, '/report');
  });

  it('refuses a bad expression naming spec.cron and the reason', () => {
    const r = refusal(tt({ cron: '61 * * * *' }));
    assert.equal(r.field, 'spec.cron');
    assert.match(r.message, /^spec\.cron: '61 \* \* \* \*' is not a valid schedule: .*minute/i);
  });

  it('refuses what a timer cannot call', () => {
    assert.equal(refusal(tt({ functionref: { type: 'function-weights', functionweights: { a: 50, b: 50 } } })).field, 'spec.functionref.type');
    assert.equal(refusal(tt({ functionref: { type: 'name' } })).field, 'spec.functionref.name');
    assert.equal(refusal(tt({ method: 'CONNECT' })).field, 'spec.method');
    assert.equal(refusal(tt({ method: 'FETCH' })).field, 'spec.method');
    assert.equal(refusal(tt({ subpath: '/a b' })).field, 'spec.subpath');
    assert.equal(refusal(tt({ subpath: '/a/../b' })).field, 'spec.subpath');
    assert.equal(refusal(tt({ timezone: 'UTC' })).field, 'spec.timezone');
  });
});
