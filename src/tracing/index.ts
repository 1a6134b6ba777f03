// Tracing for one `flint server` process: a tracer whose spans go to an OTLP
// receiver over HTTP. `flint server` imports this module only when
// `tracing.otlpEndpoint` is set (docs/tracing.md).
import os from 'node:os';
import { Counter, type Registry } from 'prom-client';
import { OtlpHttpExporter } from './otlp-exporter.ts';
import { SpanTracer } from './tracer.ts';
import type { Tracer } from './types.ts';

export interface TracingSettings {
  /** The receiver's base URL (`http://collector:4318`); a URL ending in `/v1/traces` is used as it is. */
  otlpEndpoint: string;
  serviceName: string;
  sampleRatio: number;
}

export interface TracingOptions {
  /** Flint's version (service.version). */
  version: string;
  /** This process among its replicas (service.instance.id). */
  instanceId: string;
  /** The components this process runs (flint.role). */
  role: string;
  /** Where a failing export is told (at most once a minute). */
  warn: (message: string) => void;
  /** Export tuning (tests). */
  intervalMs?: number;
}

export interface Tracing {
  readonly tracer: Tracer;
  /** Adds the exporter's counters to a Prometheus registry (each component's /metrics). */
  register(registry: Registry): void;
  /** Sends the spans still queued (for a few seconds at most), then stops exporting. */
  shutdown(): Promise<void>;
}

/** Where OTLP/HTTP traces go for an endpoint: `<endpoint>/v1/traces`, as OTEL_EXPORTER_OTLP_ENDPOINT is read. */
export function tracesUrl(endpoint: string): string {
  const base = endpoint.replace(/\/+$/, '');
  return base.endsWith('/v1/traces') ? base : `${base}/v1/traces`;
}

export function startTracing(settings: TracingSettings, opts: TracingOptions): Tracing {
  const exporter = new OtlpHttpExporter({
    url: tracesUrl(settings.otlpEndpoint),
    resource: {
      'service.name': settings.serviceName,
      'service.version': opts.version,
      'service.instance.id': opts.instanceId,
      'host.name': os.hostname(),
      'flint.role': opts.role,
    },
    scope: { name: 'flint', version: opts.version },
    intervalMs: opts.intervalMs,
    onError: opts.warn,
  });
  return {
    tracer: new SpanTracer({ sink: exporter, sampleRatio: settings.sampleRatio }),
    register(registry) {
      // Read when scraped: the exporter keeps plain numbers.
      new Counter({
        name: 'flint_tracing_spans_exported_total',
        help: 'Spans the OTLP receiver accepted',
        registers: [registry],
        collect() {
          this.reset();
          this.inc(exporter.exported);
        },
      });
      new Counter({
        name: 'flint_tracing_spans_dropped_total',
        help: 'Spans dropped: the export queue was full, or an export failed or was refused',
        registers: [registry],
        collect() {
          this.reset();
          this.inc(exporter.dropped);
        },
      });
    },
    shutdown: () => exporter.shutdown(),
  };
}
