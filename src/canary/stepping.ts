// What a canary does at the end of one interval, from the route's weights
// and the new function's answers over that interval: nothing but pure
// decisions, so the rules read (and are tested) apart from timers and stores.
//
// As Fission's canary controller: while the new function takes no traffic
// (weight 0) there is nothing to judge and the first step is taken; after
// that each step needs the interval's failure rate (5xx answers in percent
// of requests) to be at most the threshold. An interval in which no request
// reached the new function holds the weights where they are, to be judged
// again one interval later. Above the threshold every bit of the new
// function's weight goes back to the old function. Weights move from the old
// function to the new one only, so a route's weights keep adding up to 100;
// the canary has succeeded when the old function's weight reaches 0.
import type { CanaryConfigSpec, FunctionReference } from '../api/kinds.ts';

export interface Counts {
  requests: number;
  /** Answers 5xx. */
  failures: number;
}

export type Decision =
  | { action: 'hold'; message: string; rate?: undefined }
  | { action: 'step'; weights: Record<string, number>; newWeight: number; done: boolean; message: string; rate?: number; requests?: number }
  | { action: 'rollback'; weights: Record<string, number>; rate: number; requests: number; message: string }
  | { action: 'abort'; message: string; rate?: undefined };

export const DEFAULT_STEP = 20;
export const DEFAULT_THRESHOLD = 10;
export const DEFAULT_INTERVAL = '2m';

/** Percent, to two decimals. */
export function failureRate(c: Counts): number {
  return c.requests === 0 ? 0 : Math.round((c.failures / c.requests) * 10_000) / 100;
}

const pct = (n: number) => `${Number.isInteger(n) ? n : n.toFixed(2).replace(/0$/, '')}%`;

/** Why the route cannot carry this canary, or undefined when it can. */
export function routeProblem(spec: CanaryConfigSpec, ref: FunctionReference | undefined): string | undefined {
  if (!ref) return `HTTPTrigger '${spec.trigger}' no longer exists`;
  if ((ref.type ?? 'name') !== 'function-weights') return `HTTPTrigger '${spec.trigger}' no longer weighs functions (its functionref is a single name)`;
  for (const f of [spec.newfunction, spec.oldfunction]) {
    if (!Object.hasOwn(ref.functionweights ?? {}, f)) return `HTTPTrigger '${spec.trigger}' no longer weighs function '${f}'`;
  }
  return undefined;
}

/** `step` percent (or what is left) from the old function to the new one; the others keep theirs. */
export function steppedWeights(weights: Record<string, number>, newFn: string, oldFn: string, step: number): Record<string, number> {
  const move = Math.min(step, weights[oldFn] ?? 0);
  return { ...weights, [newFn]: (weights[newFn] ?? 0) + move, [oldFn]: (weights[oldFn] ?? 0) - move };
}

/** Everything the new function had back to the old one. */
export function rolledBackWeights(weights: Record<string, number>, newFn: string, oldFn: string): Record<string, number> {
  return { ...weights, [newFn]: 0, [oldFn]: (weights[oldFn] ?? 0) + (weights[newFn] ?? 0) };
}

/**
 * The decision at the end of an interval. `window`: the new function's
 * requests and 5xx answers over it (undefined when they could not be read,
 * which holds like an interval without traffic); `interval` names it in messages.
 */
export function decide(spec: CanaryConfigSpec, ref: FunctionReference | undefined, window: Counts | undefined, interval: string): Decision {
  const problem = routeProblem(spec, ref);
  if (problem) return { action: 'abort', message: `${problem}: the canary stopped, the route's weights are left as they are` };
  const { newfunction: newFn, oldfunction: oldFn } = spec;
  const weights = { ...(ref as FunctionReference).functionweights } as Record<string, number>;
  const threshold = spec.failurethreshold ?? DEFAULT_THRESHOLD;
  let rate: number | undefined;
  let requests: number | undefined;
  if ((weights[newFn] ?? 0) > 0) {
    if (!window || window.requests === 0) {
      return {
        action: 'hold',
        message: `'${newFn}' at ${pct(weights[newFn])}: ${window ? 'no request reached it' : 'its request counts could not be read'} in the last ${interval}, so the weights stay until an interval has some`,
      };
    }
    rate = failureRate(window);
    requests = window.requests;
    if (rate > threshold) {
      return {
        action: 'rollback',
        weights: rolledBackWeights(weights, newFn, oldFn),
        rate,
        requests,
        message: `failure rate ${pct(rate)} (${window.failures} of ${window.requests} requests to '${newFn}' answered 5xx in the last ${interval}) is above the threshold of ${threshold}%: all its traffic is back on '${oldFn}'`,
      };
    }
  }
  const next = steppedWeights(weights, newFn, oldFn, spec.weightincrement ?? DEFAULT_STEP);
  const done = next[oldFn] === 0;
  const judged = rate === undefined ? '' : ` (failure rate ${pct(rate)} of ${requests} requests in the last ${interval})`;
  const message = done ? `succeeded: all of '${oldFn}''s traffic is on '${newFn}' (${pct(next[newFn])})${judged}` : `'${newFn}' at ${pct(next[newFn])}${judged}`;
  return { action: 'step', weights: next, newWeight: next[newFn], done, message, rate, requests };
}
