// The local executor's figures on the control plane's /metrics: instances
// per function, and how much of the instance budget is in use, so an
// operator sees a budget running out before requests get 503s.
import { Gauge, type Registry } from 'prom-client';
import type { InstanceBudget } from './instance-budget.ts';

export interface InstanceCounts {
  status(): { functions: Record<string, { instances: number; starting: number }>; pools: Record<string, number> };
  starts(): { starting: number; waiting: number; limit: number };
}

export function registerExecutorMetrics(registry: Registry, executor: InstanceCounts, budget: InstanceBudget | undefined): void {
  new Gauge({
    name: 'flint_executor_instances',
    help: 'Specialized instances of a function (state="running"), and those being started for it (state="starting")',
    labelNames: ['function', 'namespace', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, s] of Object.entries(executor.status().functions)) {
        const slash = key.indexOf('/');
        const labels = { namespace: key.slice(0, slash), function: key.slice(slash + 1) };
        this.set({ ...labels, state: 'running' }, s.instances);
        this.set({ ...labels, state: 'starting' }, s.starting);
      }
    },
  });
  new Gauge({
    name: 'flint_executor_warm_workers',
    help: 'Idle warm workers of an environment\'s pool',
    labelNames: ['environment'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [env, n] of Object.entries(executor.status().pools)) this.set({ environment: env }, n);
    },
  });
  new Gauge({
    name: 'flint_executor_worker_starts',
    help: 'Worker processes starting (state="starting"), waiting for their turn to start (state="waiting"), and how many may start at once (state="limit", executor.concurrentStarts)',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const s = executor.starts();
      this.set({ state: 'starting' }, s.starting);
      this.set({ state: 'waiting' }, s.waiting);
      this.set({ state: 'limit' }, s.limit);
    },
  });
  if (!budget) return;
  new Gauge({
    name: 'flint_executor_budget_instances',
    help: 'Worker processes holding a share of the instance budget (state="used") and the most there may be (state="limit", executor.maxInstances)',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      this.set({ state: 'used' }, budget.instances);
      this.set({ state: 'limit' }, budget.limits.maxInstances);
    },
  });
  new Gauge({
    name: 'flint_executor_budget_memory_megabytes',
    help: 'Memory caps of the worker processes holding a share of the budget (state="used") and the most allowed (state="limit", executor.maxMemoryMB)',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      this.set({ state: 'used' }, budget.memoryMB);
      this.set({ state: 'limit' }, budget.limits.maxMemoryMB);
    },
  });
}
