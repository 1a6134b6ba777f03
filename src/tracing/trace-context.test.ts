import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatTraceparent, newSpanId, newTraceId, parseTraceparent } from './trace-context.ts';
import { memoryTracer } from './testing.ts';
import { SPAN_KIND } from './types.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('W3C traceparent', () => {
  it('reads a valid value, sampled or not', () => {
    assert.deepEqual(parseTraceparent(`00-${TRACE}-${SPAN}-01`), { traceId: TRACE, spanId: SPAN, sampled: true });
    assert.deepEqual(parseTraceparent(`00-${TRACE}-${SPAN}-00`), { traceId: TRACE, spanId: SPAN, sampled: false });
    // Other flag bits are not the sampled bit.
    assert.deepEqual(parseTraceparent(`00-${TRACE}-${SPAN}-02`), { traceId: TRACE, spanId: SPAN, sampled: false });
    assert.deepEqual(parseTraceparent(` 00-${TRACE}-${SPAN}-03 `), { traceId: TRACE, spanId: SPAN, sampled: true });
  });

  it('reads a later version by its first four fields', () => {
    assert.deepEqual(parseTraceparent(`01-${TRACE}-${SPAN}-01`), { traceId: TRACE, spanId: SPAN, sampled: true });
    assert.deepEqual(parseTraceparent(`cc-${TRACE}-${SPAN}-01-what-comes-later`), { traceId: TRACE, spanId: SPAN, sampled: true });
  });

  it('refuses malformed values', () => {
    for (const bad of [
      undefined,
      '',
      'garbage',
      `00-${TRACE}-${SPAN}-1`,
      `00-${TRACE}-${SPAN}-01-extra`,
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${TRACE}-${SPAN.toUpperCase()}-01`,
      `00-${'0'.repeat(32)}-${SPAN}-01`,
      `00-${TRACE}-${'0'.repeat(16)}-01`,
      `ff-${TRACE}-${SPAN}-01`,
      `0g-${TRACE}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-0z`,
      `00_${TRACE}-${SPAN}-01`,
      `00-${TRACE.slice(1)}x-${SPAN}-01`,
      `01-${TRACE}-${SPAN}-01x`,
      // Two headers joined into one list.
      `00-${TRACE}-${SPAN}-01, 00-${TRACE}-${SPAN}-01`,
    ]) {
      assert.equal(parseTraceparent(bad), undefined, String(bad));
    }
  });

  it('writes what it reads, and makes valid ids', () => {
    const tp = formatTraceparent(TRACE, SPAN, true);
    assert.equal(tp, `00-${TRACE}-${SPAN}-01`);
    assert.deepEqual(parseTraceparent(formatTraceparent(TRACE, SPAN, false)), { traceId: TRACE, spanId: SPAN, sampled: false });
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const t = newTraceId();
      const s = newSpanId();
      assert.match(t, /^[0-9a-f]{32}$/);
      assert.match(s, /^[0-9a-f]{16}$/);
      assert.ok(parseTraceparent(formatTraceparent(t, s, true)));
      seen.add(s);
    }
    assert.equal(seen.size, 2000);
  });
});

describe('span tracer', () => {
  it('makes children in their parent trace and records them when the parent is sampled', () => {
    const m = memoryTracer(1);
    const root = m.tracer.startSpan('root', SPAN_KIND.server, undefined, 10);
    const child = m.tracer.startSpan('child', SPAN_KIND.internal, root.context);
    child.set('n', 1).set('ok', true).end(12);
    root.fail('broken').end(20);
    root.set('late', 'ignored').end(30);
    assert.equal(m.spans.length, 2);
    const [c, r] = m.spans;
    assert.equal(c.traceId, r.traceId);
    assert.equal(c.parentSpanId, r.spanId);
    assert.equal(r.parentSpanId, '');
    assert.deepEqual(c.attributes, ['n', 1, 'ok', true]);
    assert.equal(r.startMs, 10);
    assert.equal(r.endMs, 20);
    assert.equal(r.statusCode, 2);
    assert.equal(r.statusMessage, 'broken');
    assert.equal(root.traceparent(), `00-${r.traceId}-${r.spanId}-01`);
  });

  it("follows an incoming trace's sampled flag, and samples new traces at the ratio", () => {
    const m = memoryTracer(1);
    const unsampled = m.tracer.startSpan('x', SPAN_KIND.server, m.tracer.extract(`00-${TRACE}-${SPAN}-00`));
    assert.equal(unsampled.recording, false);
    assert.match(unsampled.traceparent(), new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
    assert.notEqual(unsampled.context.spanId, SPAN);
    unsampled.end();
    assert.equal(m.spans.length, 0);

    const none = memoryTracer(0);
    const sampledParent = none.tracer.startSpan('y', SPAN_KIND.server, none.tracer.extract(`00-${TRACE}-${SPAN}-01`));
    assert.equal(sampledParent.recording, true);
    const root = none.tracer.startSpan('z', SPAN_KIND.server, undefined);
    assert.equal(root.recording, false);
    assert.match(root.traceparent(), /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
  });
});
