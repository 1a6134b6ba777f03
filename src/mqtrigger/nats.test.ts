import fs from 'node:fs';
import { after, before } from 'node:test';
import { type LocalBroker, startNats } from '../../scripts/local-brokers.ts';
import { runConnectorContract } from './connector.contract.ts';
import { NatsConnector } from './nats.ts';

let nats: LocalBroker;
before(async () => {
  nats = await startNats();
});
after(async () => {
  await nats?.stop();
  if (nats) fs.rmSync(nats.dir, { recursive: true, force: true });
});

runConnectorContract('nats-jetstream', async () => new NatsConnector({ servers: [nats.url.replace(/^nats:\/\//, '')] }));
