// RabbitMQ and Redis connectors over TLS to real servers that want a client
// certificate: the trigger secret's CA and certificate get them in, and what
// is missing is an error that says what to change (never a crash).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { type LocalBroker, startRabbit, startRedis } from '../../scripts/local-brokers.ts';
import type { TlsMaterial } from '../api/tls-secret.ts';
import type { Connector } from './connector.ts';
import { errorText } from './error-text.ts';
import { RabbitConnector } from './rabbitmq.ts';
import { RedisConnector } from './redis.ts';

const CASES = [
  { name: 'redis', start: startRedis, make: (url: string, tls: TlsMaterial | undefined) => new RedisConnector({ url, tls }) },
  { name: 'rabbitmq', start: startRabbit, make: (url: string, tls: TlsMaterial | undefined) => new RabbitConnector({ url, tls }) },
];

/** The connector's first publish, or the text of its error. */
async function tryPublish(conn: Connector, topic: string): Promise<string> {
  try {
    await conn.publish(topic, { value: 'x' });
    return 'published';
  } catch (err) {
    return errorText(err);
  } finally {
    await conn.close().catch(() => {});
  }
}

for (const c of CASES) {
  describe(`${c.name} over TLS`, { timeout: 120_000 }, () => {
    let broker: LocalBroker;
    let material: TlsMaterial;
    before(async () => {
      broker = await c.start({ tls: true });
      const tls = broker.tls!;
      material = { ca: tls.ca, cert: tls.client.cert, key: tls.client.key };
    });
    after(async () => {
      await broker?.stop();
      if (broker) fs.rmSync(broker.dir, { recursive: true, force: true });
    });

    it('publishes and consumes with the CA and client certificate', async () => {
      const conn = c.make(broker.tls!.url, material);
      const got: string[] = [];
      try {
        const sub = await conn.subscribe({ group: 'g', topic: 'tls-jobs', onMessage: async (m) => void got.push(m.value.toString()) });
        await conn.publish('tls-jobs', { value: 'over tls' });
        for (let i = 0; i < 200 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
        await sub.close();
      } finally {
        await conn.close();
      }
      assert.deepEqual(got, ['over tls']);
    });

    it('says a client certificate is wanted when the secret has none', async () => {
      const text = await tryPublish(c.make(broker.tls!.url, { ca: material.ca }), 'tls-none');
      assert.match(text, /the server wants a client certificate: put it in the trigger secret's cert and key/);
    });

    it("says the server's CA is not trusted when the secret does not give it", async () => {
      const text = await tryPublish(c.make(broker.tls!.url, { cert: material.cert, key: material.key }), 'tls-noca');
      assert.match(text, /the server's certificate is not from a CA the trigger trusts: put that CA in the trigger secret's ca/);
    });
  });
}
