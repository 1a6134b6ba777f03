// What the components see of tracing: a tracer that starts spans and reads
// and writes W3C trace context. Components import only these types; the
// implementation (src/tracing/index.ts) is loaded by `flint server` only when
// `tracing.otlpEndpoint` is set, so with tracing off no tracing code runs.

/** A span's identity as W3C trace context carries it. */
export interface SpanContext {
  /** 32 lower-case hex digits, not all zero. */
  readonly traceId: string;
  /** 16 lower-case hex digits, not all zero. */
  readonly spanId: string;
  /** The trace-flags' sampled bit: the caller records this trace. */
  readonly sampled: boolean;
}

/** OTLP's span kinds (opentelemetry/proto/trace/v1 Span.SpanKind). */
export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
export type SpanKind = (typeof SPAN_KIND)[keyof typeof SPAN_KIND];

export type AttributeValue = string | number | boolean;

export interface Span {
  readonly context: SpanContext;
  /** Whether the span is exported (its trace is sampled). */
  readonly recording: boolean;
  /** The `traceparent` header value naming this span as the parent. */
  traceparent(): string;
  /** Adds an attribute; integers are sent as OTLP ints, other numbers as doubles. */
  set(key: string, value: AttributeValue): this;
  /** Marks the span failed (OTLP status ERROR) with a short message. */
  fail(message: string): this;
  /** Ends the span, at `atMs` (performance.now() time) or now; later calls do nothing. */
  end(atMs?: number): void;
}

export interface Tracer {
  /** The span context a `traceparent` header names; undefined when absent or malformed (a new trace starts). */
  extract(traceparent: string | undefined): SpanContext | undefined;
  /**
   * Starts a span: a child of `parent` (in its trace, sampled as it is), or
   * the root of a new trace sampled at `tracing.sampleRatio`. `startMs` is
   * a performance.now() time; now when absent.
   */
  startSpan(name: string, kind: SpanKind, parent: SpanContext | undefined, startMs?: number): Span;
}
