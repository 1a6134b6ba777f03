// The OTLP/HTTP exporter against a plain HTTP server standing in for a
// receiver (the real one, the OpenTelemetry Collector's, is in
// test/tracing.test.ts): what it sends, and that it drops rather than waits.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../testing/eventually.ts';
import { encodeSpans, OtlpHttpExporter, unixNanos } from './otlp-exporter.ts';
import type { FinishedSpan } from './tracer.ts';
import { tracesUrl } from './index.ts';

interface Received {
  path: string;
  contentType: string | undefined;
  body: any;
}

let server: http.Server;
let url: string;
const received: Received[] = [];
/** The status the stand-in answers with next. */
let answer = 200;
let answerBody = '{}';
/** While set, requests are held until it resolves. */
let hold: Promise<void> | undefined;

before(async () => {
  server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (hold) await hold;
    received.push({ path: req.url ?? '', contentType: req.headers['content-type'], body: JSON.parse(Buffer.concat(chunks).toString()) });
    res.writeHead(answer, { 'content-type': 'application/json' });
    res.end(answerBody);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

let n = 0;
function span(over: Partial<FinishedSpan> = {}): FinishedSpan {
  n++;
  return {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: n.toString(16).padStart(16, '0'),
    parentSpanId: '',
    name: `span ${n}`,
    kind: 2,
    startMs: 1000,
    endMs: 1000.5,
    attributes: [],
    statusCode: 0,
    statusMessage: '',
    ...over,
  };
}

const spansIn = (r: Received[]) => r.flatMap((x) => x.body.resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans)));

describe('OTLP/HTTP exporter', () => {
  it('names the traces path of an endpoint', () => {
    assert.equal(tracesUrl('http://c:4318'), 'http://c:4318/v1/traces');
    assert.equal(tracesUrl('http://c:4318/'), 'http://c:4318/v1/traces');
    assert.equal(tracesUrl('http://c:4318/otlp/v1/traces'), 'http://c:4318/otlp/v1/traces');
  });

  it('encodes OTLP/JSON: hex ids, integer kinds, nanosecond strings, typed attributes, error status', () => {
    const doc = JSON.parse(
      encodeSpans(
        [span({ parentSpanId: 'b7ad6b7169203331', attributes: ['s', 'x', 'i', 3, 'd', 0.5, 'b', false], statusCode: 2, statusMessage: 'bad' })],
        { 'service.name': 'flint' },
        { name: 'flint', version: '1' },
      ),
    );
    const rs = doc.resourceSpans[0];
    assert.deepEqual(rs.resource.attributes, [{ key: 'service.name', value: { stringValue: 'flint' } }]);
    assert.deepEqual(rs.scopeSpans[0].scope, { name: 'flint', version: '1' });
    const s = rs.scopeSpans[0].spans[0];
    assert.equal(s.traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
    assert.equal(s.parentSpanId, 'b7ad6b7169203331');
    assert.equal(s.kind, 2);
    assert.deepEqual(s.attributes, [
      { key: 's', value: { stringValue: 'x' } },
      { key: 'i', value: { intValue: '3' } },
      { key: 'd', value: { doubleValue: 0.5 } },
      { key: 'b', value: { boolValue: false } },
    ]);
    assert.deepEqual(s.status, { code: 2, message: 'bad' });
    assert.match(s.startTimeUnixNano, /^\d{19}$/);
    assert.equal(BigInt(s.endTimeUnixNano) - BigInt(s.startTimeUnixNano), 500_000n);
    // The clock: a performance.now() time is that far after the process's time origin.
    const now = BigInt(Date.now()) * 1_000_000n;
    const at = BigInt(unixNanos(performance.now()));
    assert.ok(at - now < 1_000_000_000n && now - at < 1_000_000_000n, `${at} vs ${now}`);
  });

  it('sends a full batch at once and the rest on its timer, as JSON to the traces path', async () => {
    received.length = 0;
    const e = new OtlpHttpExporter({ url, resource: { 'service.name': 't' }, scope: { name: 'flint', version: '0' }, maxBatch: 3, intervalMs: 50 });
    for (let i = 0; i < 7; i++) e.add(span());
    await eventually(() => e.exported === 7, 'seven spans exported');
    assert.equal(e.dropped, 0);
    assert.ok(received.length >= 3, `${received.length} exports`);
    assert.ok(received.every((r) => r.path === '/v1/traces' && r.contentType === 'application/json'));
    assert.ok(received.every((r) => spansIn([r]).length <= 3));
    assert.equal(spansIn(received).length, 7);
    await e.shutdown();
  });

  it('drops and counts what finds the queue full, never waiting', async () => {
    received.length = 0;
    let release!: () => void;
    hold = new Promise((r) => {
      release = r;
    });
    const e = new OtlpHttpExporter({ url, resource: {}, scope: { name: 'flint', version: '0' }, maxQueue: 4, maxBatch: 2, intervalMs: 20 });
    e.add(span());
    e.add(span());
    // The first batch is in flight (held); four more fill the queue, two more find it full.
    await eventually(() => e.queued === 0, 'the first batch sent');
    for (let i = 0; i < 6; i++) e.add(span());
    assert.equal(e.dropped, 2);
    assert.equal(e.queued, 4);
    hold = undefined;
    release();
    await eventually(() => e.exported === 6, 'the rest exported');
    await e.shutdown();
  });

  it('counts the spans of a refused export, or of a partial success, as dropped', async () => {
    received.length = 0;
    const e = new OtlpHttpExporter({ url, resource: {}, scope: { name: 'flint', version: '0' }, intervalMs: 20 });
    const warned: string[] = [];
    const e2 = new OtlpHttpExporter({ url, resource: {}, scope: { name: 'flint', version: '0' }, intervalMs: 20, onError: (m) => warned.push(m) });
    answer = 400;
    answerBody = '{"code":3,"message":"bad"}';
    e2.add(span());
    e2.add(span());
    await eventually(() => e2.dropped === 2, 'a refused export dropped');
    assert.equal(e2.exported, 0);
    assert.equal(warned.length, 1);
    assert.match(warned[0], /answered 400/);
    answer = 200;
    answerBody = '{"partialSuccess":{"rejectedSpans":"1","errorMessage":"one bad"}}';
    e.add(span());
    e.add(span());
    await eventually(() => e.dropped === 1 && e.exported === 1, 'a partial success counted');
    answerBody = '{}';
    await e.shutdown();
    await e2.shutdown();
  });

  it('counts the spans of an export that cannot connect as dropped, and sends the queue when shut down', async () => {
    const closed = new OtlpHttpExporter({ url: 'http://127.0.0.1:1/v1/traces', resource: {}, scope: { name: 'flint', version: '0' }, intervalMs: 20 });
    closed.add(span());
    await eventually(() => closed.dropped === 1, 'an unreachable export dropped');
    await closed.shutdown();
    closed.add(span());
    assert.equal(closed.dropped, 2);

    received.length = 0;
    const e = new OtlpHttpExporter({ url, resource: {}, scope: { name: 'flint', version: '0' }, intervalMs: 60_000 });
    e.add(span());
    await e.shutdown();
    assert.equal(e.exported, 1);
    assert.equal(spansIn(received).length, 1);
  });
});
