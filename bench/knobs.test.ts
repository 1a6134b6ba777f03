import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readKnobs } from './knobs.ts';

describe('benchmark knobs', () => {
  it('has defaults for everything', () => {
    assert.deepEqual(readKnobs({}), {
      requests: 3000,
      seconds: 4,
      rounds: 3,
      authPairs: 3,
      cold: 15,
      messages: 2000,
      sandbox: 'bubblewrap',
      packages: true,
      kafka: true,
      overload: true,
      storm: true,
      stormRounds: 3,
      cli: true,
      cliRounds: 15,
      tracing: true,
      scaleOut: true,
      grantRounds: 6,
      peers: true,
    });
  });

  it('reads every knob', () => {
    const k = readKnobs({
      BENCH_REQUESTS: '500',
      BENCH_SECONDS: '2',
      BENCH_ROUNDS: '5',
      BENCH_AUTH_PAIRS: '1',
      BENCH_COLD: '3',
      BENCH_MESSAGES: '100',
      BENCH_SANDBOX: 'none',
      BENCH_PACKAGES: '0',
      BENCH_KAFKA: '1',
      BENCH_OVERLOAD: '0',
      BENCH_STORM: '0',
      BENCH_STORM_ROUNDS: '2',
      BENCH_CLI: '0',
      BENCH_CLI_ROUNDS: '7',
      BENCH_TRACING: '0',
      BENCH_SCALE_OUT: '0',
      BENCH_GRANT_ROUNDS: '3',
      BENCH_PEERS: '0',
    });
    assert.deepEqual(k, {
      requests: 500,
      seconds: 2,
      rounds: 5,
      authPairs: 1,
      cold: 3,
      messages: 100,
      sandbox: 'none',
      packages: false,
      kafka: true,
      overload: false,
      storm: false,
      stormRounds: 2,
      cli: false,
      cliRounds: 7,
      tracing: false,
      scaleOut: false,
      grantRounds: 3,
      peers: false,
    });
  });

  it('refuses what is not a knob value, naming the knob', () => {
    const cases: Array<[NodeJS.ProcessEnv, RegExp]> = [
      [{ BENCH_ROUNDS: '0' }, /BENCH_ROUNDS must be a whole number of at least 1, not '0'/],
      [{ BENCH_ROUNDS: '2.5' }, /BENCH_ROUNDS must be a whole number/],
      [{ BENCH_REQUESTS: 'many' }, /BENCH_REQUESTS must be a whole number of at least 10, not 'many'/],
      [{ BENCH_SECONDS: '-1' }, /BENCH_SECONDS must be a whole number/],
      [{ BENCH_AUTH_PAIRS: '0' }, /BENCH_AUTH_PAIRS must be a whole number of at least 1, not '0'/],
      [{ BENCH_COLD: '1e3' }, /BENCH_COLD must be a whole number/],
      [{ BENCH_MESSAGES: '5' }, /BENCH_MESSAGES must be a whole number of at least 10/],
      [{ BENCH_SANDBOX: 'docker' }, /BENCH_SANDBOX must be bubblewrap or none, not 'docker'/],
      [{ BENCH_KAFKA: 'no' }, /BENCH_KAFKA must be 0 \(skip\) or 1 \(run\), not 'no'/],
      [{ BENCH_CLI_ROUNDS: '2' }, /BENCH_CLI_ROUNDS must be a whole number of at least 3, not '2'/],
      [{ BENCH_SCALE_OUT: 'yes' }, /BENCH_SCALE_OUT must be 0 \(skip\) or 1 \(run\), not 'yes'/],
      [{ BENCH_PEERS: 'off' }, /BENCH_PEERS must be 0 \(skip\) or 1 \(run\), not 'off'/],
      [{ BENCH_STORM_ROUNDS: '0' }, /BENCH_STORM_ROUNDS must be a whole number of at least 1, not '0'/],
      [{ BENCH_GRANT_ROUNDS: '1' }, /BENCH_GRANT_ROUNDS must be a whole number of at least 2, not '1'/],
    ];
    for (const [env, message] of cases) assert.throws(() => readKnobs(env), message, JSON.stringify(env));
  });
});
