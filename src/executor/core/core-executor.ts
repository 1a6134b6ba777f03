// What every executor backed by the instance core shares: leases come from
// the core, and what its watches delivered is kept the same way. A backend class extends this and sets `core`
// in its constructor (its backend hooks close over the backend itself).
import type { FunctionResource, Package } from '../../api/kinds.ts';
import type { Watch } from '../../store/store.ts';
import type { Executor, Lease } from '../types.ts';
import type { InstanceCore } from './instance-core.ts';
import type { CoreInstance } from './types.ts';

export abstract class CoreExecutor<I extends CoreInstance> implements Executor {
  protected core!: InstanceCore<I>;
  /** The newest copy of every function and package the executor's own watches delivered. */
  protected readonly functions = new Map<string, FunctionResource>();
  protected readonly packages = new Map<string, Package>();
  protected readonly watches: Watch[] = [];
  protected stopped = false;

  abstract start(): Promise<void>;
  abstract stop(): Promise<void>;

  tryAcquire(fn: FunctionResource): Lease | undefined {
    return this.core.tryAcquire(fn);
  }

  acquire(fn: FunctionResource, signal?: AbortSignal): Promise<Lease> {
    return this.core.acquire(fn, signal);
  }

  /** A slot on that very instance (executor-service.ts: a router's grant from an earlier leader, after a failover). */
  leaseInstance(fn: FunctionResource, instanceId: string): Lease | undefined {
    return this.core.leaseInstance(fn, instanceId);
  }
}
