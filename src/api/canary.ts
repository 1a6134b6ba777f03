// A canary's state as its status tells it, for the control plane, the canary
// controller and the CLI alike. The status is the canary controller's alone:
// it records the generation (spec) it is for, so a spec the controller has
// not taken up yet is a rollout about to start, whatever the status says of
// the spec before it.
import type { CanaryConfig } from './kinds.ts';

/** Whether the controller has yet to take up this spec. */
export function isNewRollout(cc: CanaryConfig): boolean {
  return cc.status?.observedGeneration !== cc.metadata.generation;
}

/** `pending` (rolling out, or about to), `succeeded`, `failed` or `aborted`. */
export function canaryState(cc: CanaryConfig): string {
  return isNewRollout(cc) ? 'pending' : (cc.status?.status ?? 'pending');
}

export function isRollingOut(cc: CanaryConfig): boolean {
  return canaryState(cc) === 'pending';
}
