// The router's Prometheus metrics, on a registry of its own.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export interface RouterMetrics {
  registry: Registry;
  requests: Counter<'code' | 'method' | 'function'>;
  duration: Histogram<'function'>;
  coldStarts: Counter<'function'>;
  inFlight: Gauge;
}

export function createRouterMetrics(): RouterMetrics {
  const registry = new Registry();
  return {
    registry,
    requests: new Counter({
      name: 'flint_router_requests_total',
      help: 'Requests the router answered, by status code, method and function',
      labelNames: ['code', 'method', 'function'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'flint_router_request_duration_seconds',
      help: 'Time from request to response end, by function',
      labelNames: ['function'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    coldStarts: new Counter({
      name: 'flint_router_cold_starts_total',
      help: 'Requests that waited for an instance to be specialized',
      labelNames: ['function'],
      registers: [registry],
    }),
    inFlight: new Gauge({ name: 'flint_router_in_flight_requests', help: 'Requests being proxied now', registers: [registry] }),
  };
}
