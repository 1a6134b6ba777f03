import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StartGate } from './start-gate.ts';

/** A start that finishes when told to. */
function pending(): { promise: Promise<string>; finish(v: string): void; fail(e: Error): void } {
  let finish!: (v: string) => void;
  let fail!: (e: Error) => void;
  const promise = new Promise<string>((res, rej) => {
    finish = res;
    fail = rej;
  });
  return { promise, finish, fail };
}

const tick = () => new Promise((r) => setImmediate(r));

/** Starts through `gate` that note, by name, when each began. */
function recorder(gate: StartGate) {
  const began: string[] = [];
  const run = (name: string, priority: 'demand' | 'background', p: Promise<string>) =>
    gate.run(priority, () => {
      began.push(name);
      return p;
    });
  return { began, run };
}

describe('start gate', () => {
  it('runs at most `slots` starts at once; the others wait and run as slots free, each start getting its own result', async () => {
    const gate = new StartGate(2, { holdCapMs: 60_000, promoteAfterMs: 60_000 });
    const starts = Array.from({ length: 5 }, () => pending());
    const began: number[] = [];
    const results = starts.map((s, i) =>
      gate.run('demand', () => {
        began.push(i);
        return s.promise;
      }),
    );
    await tick();
    assert.deepEqual(began, [0, 1]);
    assert.equal(gate.held, 2);
    assert.equal(gate.waiting, 3);
    starts[1].finish('one');
    assert.equal(await results[1], 'one');
    await tick();
    assert.deepEqual(began, [0, 1, 2], 'the first waiter took the freed slot');
    starts[0].fail(new Error('boom'));
    await assert.rejects(results[0], /boom/);
    await tick();
    assert.deepEqual(began, [0, 1, 2, 3], 'a failed start gives its slot back too');
    for (const i of [2, 3]) starts[i].finish(`s${i}`);
    await tick();
    assert.deepEqual(began, [0, 1, 2, 3, 4]);
    starts[4].finish('s4');
    assert.deepEqual(await Promise.all(results.slice(2)), ['s2', 's3', 's4']);
    assert.equal(gate.held, 0);
    assert.equal(gate.waiting, 0);
  });

  it('gives a free slot to starts a request waits for before warm workers for a pool, each kind in arrival order', async () => {
    const gate = new StartGate(1, { holdCapMs: 60_000, promoteAfterMs: 60_000 });
    const first = pending();
    const { began, run } = recorder(gate);
    const all = [run('pool-0', 'background', first.promise)];
    await tick();
    for (const [name, priority] of [['pool-1', 'background'], ['call-1', 'demand'], ['pool-2', 'background'], ['call-2', 'demand']] as const) {
      all.push(run(name, priority, Promise.resolve(name)));
    }
    first.finish('pool-0');
    await Promise.all(all);
    assert.deepEqual(began, ['pool-0', 'call-1', 'call-2', 'pool-1', 'pool-2']);
  });

  it('never lets warm workers for a pool hold up a start a request waits for, and starts them only once no such start runs', async () => {
    const gate = new StartGate(1, { holdCapMs: 60_000, promoteAfterMs: 60_000 });
    const { began, run } = recorder(gate);
    const pool = pending();
    const all = [run('pool-0', 'background', pool.promise)];
    await tick();
    const call = pending();
    all.push(run('call-1', 'demand', call.promise));
    await tick();
    assert.deepEqual(began, ['pool-0', 'call-1'], 'the call did not wait for the pool worker holding the slot');
    all.push(run('pool-1', 'background', Promise.resolve('pool-1')));
    pool.finish('pool-0');
    await tick();
    assert.deepEqual(began, ['pool-0', 'call-1'], 'no pool worker starts while a call\'s start runs');
    call.finish('call-1');
    await Promise.all(all);
    assert.deepEqual(began, ['pool-0', 'call-1', 'pool-1']);
    assert.equal(gate.held, 0);
  });

  it('lets a background start that has waited too long queue behind the demand already waiting, so endless demand cannot stall it', async () => {
    const gate = new StartGate(1, { holdCapMs: 60_000, promoteAfterMs: 30 });
    const { began, run } = recorder(gate);
    const first = pending();
    const all = [run('call-0', 'demand', first.promise), run('rollout', 'background', Promise.resolve('rollout'))];
    const queued = pending();
    all.push(run('call-1', 'demand', queued.promise));
    await new Promise((r) => setTimeout(r, 60));
    // Demand that arrives after the promotion queues behind the promoted start.
    all.push(run('call-2', 'demand', Promise.resolve('call-2')));
    first.finish('call-0');
    await tick();
    assert.deepEqual(began, ['call-0', 'call-1']);
    queued.finish('call-1');
    await Promise.all(all);
    assert.deepEqual(began, ['call-0', 'call-1', 'rollout', 'call-2']);
    assert.equal(gate.held, 0, 'the promoted start gave back the slot it took');
    assert.equal(await run('pool', 'background', Promise.resolve('pool')), 'pool', 'and a background start runs as before');
    assert.equal(gate.held, 0);
  });

  it('takes the slot back from a start that holds it past the cap, and its late release frees nothing', async () => {
    const gate = new StartGate(1, { holdCapMs: 20, promoteAfterMs: 60_000 });
    const stuck = pending();
    const { began, run } = recorder(gate);
    const slow = run('slow', 'demand', stuck.promise);
    const next = run('next', 'demand', Promise.resolve('n'));
    await tick();
    assert.deepEqual(began, ['slow']);
    assert.equal(await next, 'n', 'the waiter ran once the cap had passed, the slow start still going');
    assert.equal(gate.held, 0);
    stuck.finish('late');
    assert.equal(await slow, 'late');
    assert.equal(gate.held, 0, 'the late release did not count twice (it would be -1, and two starts could then run at once)');
  });

  it('refuses a gate without a slot', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) assert.throws(() => new StartGate(bad, { holdCapMs: 1000, promoteAfterMs: 1000 }), RangeError, String(bad));
  });
});
