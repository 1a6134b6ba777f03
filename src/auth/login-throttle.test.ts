import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLoginThrottle, throttleKey } from './login-throttle.ts';

describe('login throttle', () => {
  it('lets the first failures pass, then locks with doubling, capped delays', () => {
    let clock = 0;
    const th = createLoginThrottle({ freeFailures: 3, baseDelayMs: 1000, maxDelayMs: 8000, decayMs: 3_600_000, now: () => clock });
    const locks = [];
    for (let i = 0; i < 8; i++) {
      assert.equal(th.retryAfter('10.0.0.1'), 0, `attempt ${i + 1} is allowed`);
      const lock = th.fail('10.0.0.1');
      locks.push(lock);
      clock += lock * 1000; // wait out the lock before the next try
    }
    assert.deepEqual(locks, [0, 0, 0, 1, 2, 4, 8, 8]);
    assert.equal(th.failures('10.0.0.1'), 8);
  });

  it('answers the remaining wait while locked, and only for that address', () => {
    let clock = 0;
    const th = createLoginThrottle({ freeFailures: 1, baseDelayMs: 5000, now: () => clock });
    th.fail('10.0.0.1');
    assert.equal(th.fail('10.0.0.1'), 5);
    clock += 1200;
    assert.equal(th.retryAfter('10.0.0.1'), 4);
    assert.equal(th.retryAfter('10.0.0.2'), 0);
    clock += 4000;
    assert.equal(th.retryAfter('10.0.0.1'), 0);
  });

  it('forgets one failure per decay period and all of them on success', () => {
    let clock = 0;
    const th = createLoginThrottle({ decayMs: 60_000, now: () => clock });
    for (let i = 0; i < 4; i++) th.fail('a');
    assert.equal(th.failures('a'), 4);
    clock += 120_000;
    assert.equal(th.failures('a'), 2);
    clock += 180_000;
    assert.equal(th.failures('a'), 0);
    assert.equal(th.size, 0, 'a forgiven address takes no memory');
    th.fail('b');
    th.succeed('b');
    assert.equal(th.failures('b'), 0);
  });

  it('tracks a bounded number of addresses', () => {
    const th = createLoginThrottle({ maxAddresses: 100 });
    for (let i = 0; i < 1000; i++) th.fail(`10.0.${i >> 8}.${i & 255}`);
    assert.equal(th.size, 100);
    assert.equal(th.failures('10.0.3.231'), 1, 'the most recent addresses are kept');
    assert.equal(th.failures('10.0.0.0'), 0, 'the oldest were dropped');
  });

  it('counts IPv4-mapped addresses as IPv4 and IPv6 by /64', () => {
    assert.equal(throttleKey('::ffff:127.0.0.1'), '127.0.0.1');
    assert.equal(throttleKey('2001:db8:0:1:aaaa::1'), '2001:db8:0:1::/64');
    assert.equal(throttleKey('2001:db8:0:1:bbbb:1:2:3'), '2001:db8:0:1::/64');
    assert.equal(throttleKey('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(throttleKey('::1'), '0:0:0:0::/64');
    assert.equal(throttleKey(undefined), 'unknown');
  });
});
