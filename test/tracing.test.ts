// Tracing end to end: a real server with tracing on exports its spans to a
// real OTLP receiver (the OpenTelemetry Collector's otlpreceiver, built from
// its Go modules: tools/otlp-receiver), with a real Kafka broker and a
// sandboxed function that answers with the headers it got. One trace starts
// at an HTTP caller and runs through the router to the function; another
// starts at a Kafka record's traceparent and runs through the trigger, the
// router and the function, out to the response record's headers.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Consumer, type Message } from '@platformatic/kafka';
import { type KafkaBroker, startKafka } from '../scripts/kafka-broker.ts';
import { type OtlpReceiver, type ReceivedSpan, spanAttr, startOtlpReceiver } from '../scripts/otlp-receiver.ts';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

const SERVICE = 'flint-tracing-test';
const ECHO = `module.exports = async (context) => ({
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(context.request.headers),
});`;
const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 };

let receiver: OtlpReceiver;
let kafka: KafkaBroker;
let server: TestServer;
let work: string;

function ok(args: string[]): string {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** The parts of a traceparent value. */
function parts(tp: unknown): { traceId: string; spanId: string; flags: string } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(String(tp));
  assert.ok(m, `not a traceparent: ${tp}`);
  return { traceId: m[1], spanId: m[2], flags: m[3] };
}

/** The receiver's spans of one trace, once `ready` holds for them. */
async function traceOf(traceId: string, ready: (spans: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]> {
  return eventually(
    () => {
      const spans = receiver.spans().filter((s) => s.traceId === traceId);
      return ready(spans) ? spans : undefined;
    },
    `the spans of trace ${traceId} at the receiver`,
    30_000,
    200,
  );
}

function one(spans: ReceivedSpan[], name: string, parent?: ReceivedSpan): ReceivedSpan {
  const found = spans.filter((s) => s.name === name && (parent === undefined || s.parentSpanId === parent.spanId));
  assert.equal(found.length, 1, `one span '${name}'${parent ? ` under '${parent.name}'` : ''} in ${JSON.stringify(spans.map((s) => [s.name, s.spanId, s.parentSpanId]))}`);
  return found[0];
}

/** The router's spans of one request: its server span (a child of `parentSpanId`) and the three below it. */
function routerSpans(spans: ReceivedSpan[], route: string, parentSpanId: string) {
  const srv = spans.find((s) => s.kind === KIND.server && s.parentSpanId === parentSpanId);
  assert.ok(srv, `a router span under ${parentSpanId} in ${JSON.stringify(spans.map((s) => [s.name, s.parentSpanId]))}`);
  assert.equal(srv.name, route);
  const match = one(spans, 'route match', srv);
  const acquire = one(spans, 'acquire', srv);
  const call = one(spans, 'function call', srv);
  assert.equal(match.kind, KIND.internal);
  assert.equal(acquire.kind, KIND.internal);
  assert.equal(call.kind, KIND.client);
  // Route match, then acquire, then the call, inside the router's span.
  const t = (s: ReceivedSpan, k: 'startTimeUnixNano' | 'endTimeUnixNano') => BigInt(s[k]);
  assert.ok(t(srv, 'startTimeUnixNano') <= t(match, 'startTimeUnixNano'));
  assert.ok(t(match, 'endTimeUnixNano') <= t(acquire, 'startTimeUnixNano'));
  assert.ok(t(acquire, 'endTimeUnixNano') <= t(call, 'startTimeUnixNano'));
  assert.ok(t(call, 'endTimeUnixNano') <= t(srv, 'endTimeUnixNano'));
  return { srv, match, acquire, call };
}

describe('tracing to a real OTLP receiver', { timeout: 600_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-tracing-'));
    [receiver, kafka] = await Promise.all([startOtlpReceiver(work), startKafka()]);
    server = await startServer({
      sets: ['kafka.enabled=true', `kafka.brokers=${kafka.brokers}`, `tracing.otlpEndpoint=${receiver.endpoint}`, `tracing.serviceName=${SERVICE}`],
    });
    fs.writeFileSync(path.join(work, 'echo.js'), ECHO);
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    ok(['fn', 'create', '--name', 'echo', '--env', 'nodejs', '--code', 'echo.js']);
    ok(['route', 'create', '--name', 'echo', '--method', 'GET', '--url', '/echo', '--function', 'echo']);
  });
  after(async () => {
    await server?.stop();
    await Promise.all([kafka?.destroy(), receiver?.stop()]);
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it("continues an HTTP caller's trace through the router to the function", async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const caller = 'b7ad6b7169203331';
    const res = await eventually(async () => {
      const r = await fetch(`${server.routerUrl}/echo`, { headers: { traceparent: `00-${traceId}-${caller}-01` } });
      return r.status === 200 ? r : undefined;
    }, 'the route');
    const seen = (await res.json()) as Record<string, string>;
    const got = parts(seen.traceparent);
    assert.equal(got.traceId, traceId, 'the function is in the caller trace');
    assert.equal(got.flags, '01');

    const spans = await traceOf(traceId, (s) => s.some((x) => x.name === 'function call'));
    const { srv, acquire, call } = routerSpans(spans, 'GET /echo', caller);
    assert.equal(srv.service, SERVICE);
    assert.equal(spanAttr(srv, 'http.response.status_code'), '200');
    assert.equal(spanAttr(srv, 'flint.function.name'), 'echo');
    assert.equal(spanAttr(acquire, 'flint.cold_start'), true, 'the first call of the function is a cold start');
    // The function's parent is the router's call.
    assert.equal(got.spanId, call.spanId);
    // The router's /metrics counts what the receiver accepted.
    await eventually(async () => {
      const text = await (await fetch(`${server.routerUrl}/metrics`)).text();
      const m = /^flint_tracing_spans_exported_total (\d+)/m.exec(text);
      return m !== null && Number(m[1]) >= 4 && /^flint_tracing_spans_dropped_total 0$/m.test(text);
    }, 'the exported spans counted');
  });

  it("carries a Kafka record's trace through the trigger, the router and the function to the response record", async () => {
    ok(['mqt', 'create', '--name', 'traced', '--function', 'echo', '--mqtype', 'kafka', '--topic', 'traced-in', '--resptopic', 'traced-out']);
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const producer = '00f067aa0ba902b7';
    const consumer = new Consumer({ clientId: 'flint-tracing-test', bootstrapBrokers: [kafka.brokers], groupId: 'tracing-verify', autocommit: true, autocreateTopics: true });
    try {
      const stream = await consumer.consume({ topics: ['traced-out'], mode: 'earliest', maxWaitTime: 500 } as never);
      const res = await fetch(`${server.controllerUrl}/topics/traced-in/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ value: '{"hello":"kafka"}', headers: { traceparent: `00-${traceId}-${producer}-01` } }),
      });
      assert.equal(res.status, 204, await res.text());
      let answer: Message | undefined;
      const timer = setTimeout(() => void stream.close(), 90_000);
      for await (const m of stream as AsyncIterable<Message>) {
        answer = m;
        break;
      }
      clearTimeout(timer);
      await stream.close();
      assert.ok(answer, 'an answer on traced-out');
      const headers = new Map([...answer.headers].map(([k, v]) => [Buffer.from(k as Buffer).toString(), Buffer.from(v as Buffer).toString()]));
      const out = parts(headers.get('traceparent'));
      assert.equal(out.traceId, traceId, 'the response record is in the input record trace');
      const seen = JSON.parse(Buffer.from(answer.value as Buffer).toString()) as Record<string, string>;
      const atFunction = parts(seen.traceparent);
      assert.equal(atFunction.traceId, traceId, 'the function is in the input record trace');

      const spans = await traceOf(traceId, (s) => s.some((x) => x.name === 'send traced-out') && s.some((x) => x.name === 'function call'));
      assert.ok(spans.every((s) => s.service === SERVICE));
      // The trigger's handling of the record, a child of the record's context.
      const proc = one(spans, 'process traced-in');
      assert.equal(proc.parentSpanId, producer);
      assert.equal(proc.kind, KIND.consumer);
      assert.equal(spanAttr(proc, 'messaging.system'), 'kafka');
      assert.equal(spanAttr(proc, 'flint.trigger'), 'default/traced');
      // Its call of the function, through the router.
      const post = one(spans, 'POST', proc);
      assert.equal(post.kind, KIND.client);
      assert.equal(spanAttr(post, 'http.response.status_code'), '200');
      const { acquire, call } = routerSpans(spans, 'POST /flint-function/{function}', post.spanId);
      assert.equal(spanAttr(acquire, 'flint.cold_start'), false, 'the instance from the first test is warm');
      assert.equal(atFunction.spanId, call.spanId);
      // The answer's publication, whose context the response record carries.
      const send = one(spans, 'send traced-out', proc);
      assert.equal(send.kind, KIND.producer);
      assert.equal(out.spanId, send.spanId);
      // One tree: every span but the trigger's own hangs from another span of the trace.
      const ids = new Set(spans.map((s) => s.spanId));
      for (const s of spans) if (s !== proc) assert.ok(s.parentSpanId && ids.has(s.parentSpanId), `${s.name} has its parent in the trace`);
    } finally {
      await Promise.resolve(consumer.close(true)).catch(() => {});
    }
  });
});
