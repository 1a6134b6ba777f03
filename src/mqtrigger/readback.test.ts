// Topic read-back against a real Kafka broker: what a reader did not take
// survives a close, a close does not wait on a message nobody read, a
// long-poll whose client left takes nothing with it, and a message is
// committed only when its reader says its reply went out.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type KafkaBroker, startKafka } from '../../scripts/kafka-broker.ts';
import { eventually } from '../testing/eventually.ts';
import type { Connector } from './connector.ts';
import { KafkaConnector } from './kafka.ts';
import { type Delivery, TopicReadback } from './readback.ts';

let broker: KafkaBroker;
let connector: KafkaConnector;
before(async () => {
  broker = await startKafka();
  connector = new KafkaConnector({ brokers: [broker.brokers], clientId: 'readback-test' });
});
after(async () => {
  // Bounded, so a regression that hangs a consumer still stops the broker.
  await within(15_000, connector?.close() ?? Promise.resolve());
  await broker?.destroy();
});

/** Whether `p` settled within `ms`. */
async function within(ms: number, p: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<false>((r) => {
    timer = setTimeout(() => r(false), ms);
  });
  const settled = p.then(
    () => true,
    () => true,
  );
  const done = await Promise.race([settled, limit]);
  clearTimeout(timer);
  return done;
}

/** The connector, counting the messages its consumers have been handed. */
function counting(c: Connector): { connector: Connector; delivered: () => number } {
  let n = 0;
  const wrapped: Connector = {
    subscribe: (opts) =>
      c.subscribe({
        ...opts,
        onMessage: (m) => {
          n++;
          return opts.onMessage(m);
        },
      }),
    publish: (t, m) => c.publish(t, m),
    ensureTopic: (t) => c.ensureTopic(t),
    close: () => c.close(),
  };
  return { connector: wrapped, delivered: () => n };
}


/** Commits a delivery as the endpoint does once its reply is out, and gives its text. */
const taken = (d: Delivery | undefined) => {
  d?.commit();
  return d?.message.value.toString();
};
const publish = async (topic: string, ...values: string[]) => {
  for (const v of values) await connector.publish(topic, { key: null, value: Buffer.from(v), headers: {} });
};

describe('topic read-back (Kafka)', { timeout: 120_000 }, () => {
  it('closes while holding a message nobody asked for, and that message goes to the next reader of the group', async () => {
    const topic = `rb-held-${Date.now()}`;
    await publish(topic, 'one', 'two', 'three');
    const c = counting(connector);
    const first = new TopicReadback(() => c.connector);
    assert.equal(taken(await first.read(topic, 'g', 20_000)), 'one');
    await eventually(() => c.delivered() >= 2, "the consumer to hold 'two' for a reader");
    assert.ok(await within(15_000, first.close()), 'close() finished instead of waiting on the held message');
    await assert.rejects(first.read(topic, 'g', 1000), /closed/, 'a closed read-back opens no new consumer');

    const second = new TopicReadback(() => connector);
    try {
      assert.equal(taken(await second.read(topic, 'g', 20_000)), 'two', 'the held message was given back, not committed');
      assert.equal(taken(await second.read(topic, 'g', 20_000)), 'three');
      assert.equal(await second.read(topic, 'g', 1500), undefined, 'nothing read twice');
    } finally {
      await second.close();
    }
  });

  it('commits a message only when its reader says so; one given back, or held at close, is read again', async () => {
    const topic = `rb-settle-${Date.now()}`;
    await publish(topic, 'a', 'b');
    const rb = new TopicReadback(() => connector);
    let again: TopicReadback | undefined;
    try {
      const a = await rb.read(topic, 'g', 20_000);
      assert.equal(a?.message.value.toString(), 'a');
      a?.giveBack();
      a?.commit(); // already settled: no effect
      assert.equal(taken(await rb.read(topic, 'g', 20_000)), 'a', 'given back, so read again');
      const b = await rb.read(topic, 'g', 20_000);
      assert.equal(b?.message.value.toString(), 'b');
      const next = rb.read(topic, 'g', 20_000);
      b?.giveBack();
      assert.equal(taken(await next), 'b', 'given back straight to the waiting long-poll');
      await publish(topic, 'c');
      const c = await rb.read(topic, 'g', 20_000);
      assert.equal(c?.message.value.toString(), 'c');
      // Never settled: closing must not wait on it, and it stays the group's.
      assert.ok(await within(15_000, rb.close()), 'close() finished with a delivery unsettled');
      again = new TopicReadback(() => connector);
      assert.equal(taken(await again.read(topic, 'g', 20_000)), 'c');
      assert.equal(await again.read(topic, 'g', 1500), undefined, 'nothing read twice');
    } finally {
      await rb.close();
      await again?.close();
    }
  });

  it('ends long-polls on close, and a long-poll whose client left takes no message', async () => {
    const topic = `rb-poll-${Date.now()}`;
    const rb = new TopicReadback(() => connector);
    try {
      const left = new AbortController();
      const abandoned = rb.read(topic, 'g', 20_000, left.signal);
      left.abort();
      assert.equal(await abandoned, undefined);
      await publish(topic, 'kept');
      assert.equal(taken(await rb.read(topic, 'g', 20_000)), 'kept', 'the message went to the next read');
      const pending = rb.read(topic, 'g', 60_000);
      assert.ok(await within(15_000, rb.close()));
      assert.ok(await within(1000, pending), 'the pending long-poll ended with the close');
      assert.equal(await pending, undefined);
    } finally {
      await rb.close();
    }
  });
});
