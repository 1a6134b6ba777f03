// A tracer whose spans stay in memory, for tests.
import { type FinishedSpan, SpanTracer } from './tracer.ts';
import type { Tracer } from './types.ts';

export interface MemoryTracer {
  tracer: Tracer;
  /** Ended spans, in the order they ended. */
  spans: FinishedSpan[];
  /** The value of an attribute of a span, undefined when absent. */
  attr(span: FinishedSpan, key: string): unknown;
}

export function memoryTracer(sampleRatio = 1): MemoryTracer {
  const spans: FinishedSpan[] = [];
  return {
    tracer: new SpanTracer({ sink: { add: (s) => spans.push(s) }, sampleRatio }),
    spans,
    attr(span, key) {
      for (let i = 0; i < span.attributes.length; i += 2) if (span.attributes[i] === key) return span.attributes[i + 1];
      return undefined;
    },
  };
}
