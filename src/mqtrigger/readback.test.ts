// Topic read-back against a real Kafka broker: what a reader did not take
// survives a close, and a close does not wait on a message nobody read.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type KafkaBroker, startKafka } from '../../scripts/kafka-broker.ts';
import { KafkaConnector } from './kafka.ts';
import { TopicReadback } from './readback.ts';

let broker: KafkaBroker;
let connector: KafkaConnector;
before(async () => {
  broker = await startKafka();
  connector = new KafkaConnector({ brokers: [broker.brokers], clientId: 'readback-test' });
});
after(async () => {
  await connector?.close();
  await broker?.destroy();
});

const text = (m: { value: Buffer } | undefined) => m?.value.toString();

describe('topic read-back (Kafka)', () => {
  it('closes while holding a message nobody asked for, and that message goes to the next reader of the group', { timeout: 60_000 }, async () => {
    const topic = `rb-${Date.now()}`;
    for (const v of ['one', 'two', 'three']) await connector.publish(topic, { key: null, value: Buffer.from(v), headers: {} });
    const first = new TopicReadback(() => connector);
    assert.equal(text(await first.read(topic, 'g', 20_000)), 'one');
    // The consumer has 'two' in hand by now, waiting for a reader that never comes.
    await new Promise((r) => setTimeout(r, 1000));
    await first.close();

    const second = new TopicReadback(() => connector);
    try {
      assert.equal(text(await second.read(topic, 'g', 20_000)), 'two', 'the held message was given back, not committed');
      assert.equal(text(await second.read(topic, 'g', 20_000)), 'three');
      assert.equal(await second.read(topic, 'g', 1500), undefined, 'nothing read twice');
    } finally {
      await second.close();
    }
  });
});
