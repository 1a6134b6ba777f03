import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Environment } from '../api/kinds.ts';
import { cpuMillisOf } from './process-executor.ts';

const env = (cpu: string | number | undefined) => ({ spec: { runtime: { image: 'flint/node-env' }, resources: cpu === undefined ? undefined : { limits: { cpu } } } }) as unknown as Environment;

describe('cpuMillisOf', () => {
  it('reads resources.limits.cpu as thousandths of a core', () => {
    assert.equal(cpuMillisOf(env('500m')), 500);
    assert.equal(cpuMillisOf(env('0.25')), 250);
    assert.equal(cpuMillisOf(env('2')), 2000);
    assert.equal(cpuMillisOf(env(1)), 1000);
  });

  it('means no cap when unset or zero', () => {
    assert.equal(cpuMillisOf(env(undefined)), undefined);
    assert.equal(cpuMillisOf(env('0')), undefined);
  });
});
