import fs from 'node:fs';
import { after, before } from 'node:test';
import { type LocalBroker, startRabbit } from '../../scripts/local-brokers.ts';
import { runConnectorContract } from './connector.contract.ts';
import { RabbitConnector } from './rabbitmq.ts';

let rabbit: LocalBroker;
before(async () => {
  rabbit = await startRabbit();
});
after(async () => {
  await rabbit?.stop();
  if (rabbit) fs.rmSync(rabbit.dir, { recursive: true, force: true });
});

runConnectorContract('rabbitmq', async () => new RabbitConnector({ url: rabbit.url }), { independentGroups: false });
