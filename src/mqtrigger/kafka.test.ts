import { after, before } from 'node:test';
import { type KafkaBroker, startKafka } from '../../scripts/kafka-broker.ts';
import { runConnectorContract } from './connector.contract.ts';
import { KafkaConnector } from './kafka.ts';

let broker: KafkaBroker;
before(async () => {
  broker = await startKafka();
});
after(async () => {
  await broker?.destroy();
});

runConnectorContract('kafka', async () => new KafkaConnector({ brokers: [broker.brokers] }));
