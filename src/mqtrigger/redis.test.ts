import fs from 'node:fs';
import { after, before } from 'node:test';
import { type LocalBroker, startRedis } from '../../scripts/local-brokers.ts';
import { runConnectorContract } from './connector.contract.ts';
import { RedisConnector } from './redis.ts';

let redis: LocalBroker;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
  if (redis) fs.rmSync(redis.dir, { recursive: true, force: true });
});

runConnectorContract('redis', async () => new RedisConnector({ url: redis.url }));
