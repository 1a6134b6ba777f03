// Trace context through the trigger manager, against a stand-in connector
// and a stand-in router: a message's traceparent reaches the function call
// and its answer, as it came (tracing off) or through the trigger's spans.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import type { MessageQueueTrigger } from '../api/kinds.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { eventually } from '../testing/eventually.ts';
import { type MemoryTracer, memoryTracer } from '../tracing/testing.ts';
import { SPAN_KIND } from '../tracing/types.ts';
import type { Connector, OutgoingMessage, QueueMessage, SubscribeOptions } from './connector.ts';
import { createTriggerManager, type TriggerManager } from './manager.ts';
import { traceparentOf } from './trigger-trace.ts';

const logger = pino({ level: 'silent' });
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

let dir: string;
let store: Store;
let routerStandIn: http.Server;
let routerUrl: string;
/** Headers of each call the stand-in router got. */
const calls: http.IncomingHttpHeaders[] = [];
let status = 200;

before(async () => {
  routerStandIn = http.createServer((req, res) => {
    calls.push(req.headers);
    req.resume();
    req.on('end', () => {
      // A function that answers with a traceparent of its own: the trigger's wins on the answer.
      res.writeHead(status, { 'content-type': 'text/plain', traceparent: `00-${'9'.repeat(32)}-${'9'.repeat(16)}-01` });
      res.end('answer');
    });
  });
  await new Promise<void>((r) => routerStandIn.listen(0, '127.0.0.1', () => r()));
  routerUrl = `http://127.0.0.1:${(routerStandIn.address() as AddressInfo).port}`;
});
after(async () => {
  routerStandIn.closeAllConnections();
  await new Promise((r) => routerStandIn.close(r));
});

beforeEach(async () => {
  calls.length = 0;
  status = 200;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mqt-trace-'));
  store = openSqliteStore(path.join(dir, 'flint.db'));
  await store.create<MessageQueueTrigger>({
    apiVersion: 'flint.dev/v1',
    kind: 'MessageQueueTrigger',
    metadata: { name: 'orders', namespace: 'default' },
    spec: { functionref: { type: 'name', name: 'f' }, messageQueueType: 'kafka', topic: 'in', respTopic: 'out', errorTopic: 'err' },
  } as MessageQueueTrigger);
});
let manager: TriggerManager | undefined;
afterEach(async () => {
  await manager?.stop();
  manager = undefined;
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A connector that delivers the given messages once and keeps what is published. */
function oneShot(messages: QueueMessage[]) {
  const published: { topic: string; msg: OutgoingMessage }[] = [];
  const connector: Connector = {
    ensureTopic: async () => {},
    publish: async (topic, msg) => {
      published.push({ topic, msg });
    },
    close: async () => {},
    subscribe: async (opts: SubscribeOptions) => {
      let stop!: () => void;
      const done = new Promise<void>((r) => {
        stop = r;
      });
      void (async () => {
        for (const m of messages) {
          const h = await opts.onMessage(m);
          if (h) await h.settled;
        }
      })();
      return { done, close: async () => stop() };
    },
  };
  return { published, lease: { connector, release: async () => {} } };
}

function message(headers: Record<string, string>): QueueMessage {
  return { key: null, value: Buffer.from('{}'), headers, partition: 0, offset: '7' };
}

function start(c: ReturnType<typeof oneShot>, mem?: MemoryTracer): void {
  manager = createTriggerManager({ store, logger, routerUrl: () => routerUrl, connector: async () => c.lease, tracer: mem?.tracer, retryBaseMs: 1 });
  void manager.start();
}

describe('trigger tracing', () => {
  it("passes a message's traceparent to the call and its answer as it came when tracing is off", async () => {
    const tp = `00-${TRACE}-${PARENT}-01`;
    const c = oneShot([message({ Traceparent: tp, other: 'x' })]);
    start(c);
    await eventually(() => c.published.length === 1, 'the answer');
    assert.equal(calls[0].traceparent, tp);
    assert.equal(c.published[0].topic, 'out');
    assert.equal(traceparentOf(c.published[0].msg.headers ?? {}), tp);
    assert.equal(c.published[0].msg.headers?.traceparent, tp);
  });

  it("adds no trace context to a message that had none (tracing off): the answer keeps the function's headers", async () => {
    const c = oneShot([message({})]);
    start(c);
    await eventually(() => c.published.length === 1, 'the answer');
    assert.equal(calls[0].traceparent, undefined);
    // Response headers go to the answer as they always have, the function's traceparent among them.
    assert.equal(c.published[0].msg.headers?.traceparent, `00-${'9'.repeat(32)}-${'9'.repeat(16)}-01`);
  });

  it('makes process, POST and send spans in the trace of the message, and passes their context on', async () => {
    const mem = memoryTracer();
    const c = oneShot([message({ traceparent: `00-${TRACE}-${PARENT}-01` })]);
    start(c, mem);
    await eventually(() => mem.spans.some((s) => s.kind === SPAN_KIND.consumer), 'the process span');
    const byName = new Map(mem.spans.map((s) => [s.name, s]));
    const proc = byName.get('process in');
    const post = byName.get('POST');
    const send = byName.get('send out');
    assert.ok(proc && post && send, [...byName.keys()].join(', '));
    assert.equal(proc.traceId, TRACE);
    assert.equal(proc.parentSpanId, PARENT);
    assert.equal(mem.attr(proc, 'messaging.system'), 'kafka');
    assert.equal(mem.attr(proc, 'messaging.destination.name'), 'in');
    assert.equal(mem.attr(proc, 'messaging.kafka.offset'), 7);
    assert.equal(mem.attr(proc, 'flint.trigger'), 'default/orders');
    assert.equal(post.parentSpanId, proc.spanId);
    assert.equal(post.kind, SPAN_KIND.client);
    assert.equal(mem.attr(post, 'http.response.status_code'), 200);
    assert.equal(send.parentSpanId, proc.spanId);
    assert.equal(send.kind, SPAN_KIND.producer);
    assert.ok(send.endMs <= proc.endMs);
    assert.equal(calls[0].traceparent, `00-${TRACE}-${post.spanId}-01`);
    assert.equal(c.published[0].msg.headers?.traceparent, `00-${TRACE}-${send.spanId}-01`);
  });

  it('starts a trace for a message without one, and marks a message whose calls failed', async () => {
    const mem = memoryTracer();
    status = 503;
    const t = (await store.get('MessageQueueTrigger', 'default', 'orders'))!;
    await store.update<MessageQueueTrigger>({ ...t, spec: { ...t.spec, maxRetries: 1 } });
    const c = oneShot([message({})]);
    start(c, mem);
    await eventually(() => mem.spans.some((s) => s.kind === SPAN_KIND.consumer), 'the process span');
    const proc = mem.spans.find((s) => s.kind === SPAN_KIND.consumer)!;
    assert.equal(proc.parentSpanId, '');
    assert.equal(proc.statusCode, 2);
    assert.match(proc.statusMessage, /503/);
    const posts = mem.spans.filter((s) => s.name === 'POST');
    assert.equal(posts.length, 2);
    assert.deepEqual(posts.map((p) => mem.attr(p, 'flint.attempt')), [1, 2]);
    assert.ok(posts.every((p) => p.statusCode === 2 && p.parentSpanId === proc.spanId));
    const send = mem.spans.find((s) => s.name === 'send err')!;
    assert.equal(c.published[0].topic, 'err');
    assert.equal(c.published[0].msg.headers?.traceparent, `00-${proc.traceId}-${send.spanId}-01`);
    assert.equal(calls[1].traceparent, `00-${proc.traceId}-${posts[1].spanId}-01`);
  });
});
