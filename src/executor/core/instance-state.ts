// The counters the instance core keeps on every instance; a backend's
// instance (a worker process, a pod) extends this with where it is reached
// and whether it is still usable.
import type { CoreInstance } from './types.ts';

export abstract class InstanceState implements CoreInstance {
  abstract readonly id: string;
  readonly version: string;
  readonly startedAt = Date.now();
  active = 0;
  served = 0;
  longLived = 0;
  lastUsed = Date.now();
  draining = false;
  drainDeadline?: NodeJS.Timeout;

  constructor(version: string) {
    this.version = version;
  }

  abstract usable(): boolean;
}
