// One counter for every connection a listener's caps closed, on the control
// plane's /metrics, so an operator sees a flood (and which listener it hit)
// without scraping each component.
import { Counter, type Registry } from 'prom-client';
import type { ConnectionDrop } from './connection-admission.ts';

export type DropCounter = (listener: string) => (why: ConnectionDrop) => void;

export function connectionDropCounter(registry: Registry): DropCounter {
  const counter = new Counter({
    name: 'flint_connections_dropped_total',
    help: 'Client connections closed by a listener\'s caps: max (at the cap, every connection busy), per_client (one address at its cap), evicted (an idle one closed to make room)',
    labelNames: ['listener', 'reason'],
    registers: [registry],
  });
  return (listener) => (why) => counter.inc({ listener, reason: why });
}
