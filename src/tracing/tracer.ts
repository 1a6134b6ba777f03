// Spans as plain objects: a started span is a few fields and a flat
// attribute list, handed to a sink (the OTLP exporter) when it ends. A span
// of an unsampled trace records nothing but still has ids, so the context
// passed on stays right.
import { formatTraceparent, newSpanId, newTraceId, parseTraceparent } from './trace-context.ts';
import type { AttributeValue, Span, SpanContext, SpanKind, Tracer } from './types.ts';

/** A finished span, as the exporter reads it. */
export interface FinishedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: SpanKind;
  /** performance.now() times. */
  readonly startMs: number;
  readonly endMs: number;
  /** Key, value, key, value... */
  readonly attributes: readonly (string | AttributeValue)[];
  /** OTLP status: 0 unset, 2 error. */
  readonly statusCode: 0 | 2;
  readonly statusMessage: string;
}

/** Where ended spans go; add() must not block or throw. */
export interface SpanSink {
  add(span: FinishedSpan): void;
}

class RecordedSpan implements Span, FinishedSpan, SpanContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: SpanKind;
  readonly startMs: number;
  endMs = -1;
  readonly attributes: (string | AttributeValue)[] = [];
  statusCode: 0 | 2 = 0;
  statusMessage = '';
  readonly #sink: SpanSink;

  constructor(sink: SpanSink, traceId: string, parentSpanId: string, name: string, kind: SpanKind, startMs: number) {
    this.#sink = sink;
    this.traceId = traceId;
    this.spanId = newSpanId();
    this.parentSpanId = parentSpanId;
    this.name = name;
    this.kind = kind;
    this.startMs = startMs;
  }

  get context(): SpanContext {
    return this;
  }

  get sampled(): boolean {
    return true;
  }

  get recording(): boolean {
    return true;
  }

  traceparent(): string {
    return formatTraceparent(this.traceId, this.spanId, true);
  }

  set(key: string, value: AttributeValue): this {
    if (this.endMs < 0) this.attributes.push(key, value);
    return this;
  }

  fail(message: string): this {
    if (this.endMs < 0) {
      this.statusCode = 2;
      this.statusMessage = message;
    }
    return this;
  }

  end(atMs?: number): void {
    if (this.endMs >= 0) return;
    this.endMs = atMs ?? performance.now();
    this.#sink.add(this);
  }
}

/** A span of a trace that is not sampled: ids to pass on, nothing recorded. */
class UnsampledSpan implements Span, SpanContext {
  readonly traceId: string;
  readonly spanId: string;

  constructor(traceId: string) {
    this.traceId = traceId;
    this.spanId = newSpanId();
  }

  get context(): SpanContext {
    return this;
  }

  get sampled(): boolean {
    return false;
  }

  get recording(): boolean {
    return false;
  }

  traceparent(): string {
    return formatTraceparent(this.traceId, this.spanId, false);
  }

  set(): this {
    return this;
  }

  fail(): this {
    return this;
  }

  end(): void {}
}

export interface TracerOptions {
  sink: SpanSink;
  /** The share of new traces (no incoming context) that are sampled, 0 to 1. Traces that arrive keep their caller's decision. */
  sampleRatio: number;
}

export class SpanTracer implements Tracer {
  readonly #sink: SpanSink;
  readonly #ratio: number;

  constructor(opts: TracerOptions) {
    this.#sink = opts.sink;
    this.#ratio = opts.sampleRatio;
  }

  extract(traceparent: string | undefined): SpanContext | undefined {
    return parseTraceparent(traceparent);
  }

  startSpan(name: string, kind: SpanKind, parent: SpanContext | undefined, startMs?: number): Span {
    // Parent-based: a child follows its parent's decision; a root is sampled at the ratio.
    const sampled = parent === undefined ? this.#ratio >= 1 || (this.#ratio > 0 && Math.random() < this.#ratio) : parent.sampled;
    const traceId = parent === undefined ? newTraceId() : parent.traceId;
    if (!sampled) return new UnsampledSpan(traceId);
    return new RecordedSpan(this.#sink, traceId, parent === undefined ? '' : parent.spanId, name, kind, startMs ?? performance.now());
  }
}
