import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KafkaAuth } from '../api/kafka-trigger.ts';
import type { MessageQueueTrigger, Secret } from '../api/kinds.ts';
import type { Connector } from './connector.ts';
import { KafkaClusters, kafkaConnectorFor, type KafkaTriggerSources } from './kafka-clusters.ts';

/** A connector that only records what it was made with and whether it was closed. */
function fake(made: Array<{ brokers: string[]; auth: KafkaAuth; closed: boolean }>) {
  return (brokers: string[], auth: KafkaAuth): Connector => {
    const rec = { brokers, auth, closed: false };
    made.push(rec);
    return {
      subscribe: () => Promise.reject(new Error('not here')),
      publish: async () => {},
      ensureTopic: async () => {},
      close: async () => {
        rec.closed = true;
      },
    };
  };
}

function trigger(spec: Partial<MessageQueueTrigger['spec']> = {}): MessageQueueTrigger {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'MessageQueueTrigger',
    metadata: { name: 'orders', namespace: 'team', uid: 'u', resourceVersion: '1', generation: 1, creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: { functionref: { type: 'name', name: 'f' }, messageQueueType: 'kafka', topic: 'in', ...spec },
  };
}

describe('Kafka connectors per trigger', () => {
  it('shares one connector per cluster and credentials, and closes it when the last user lets go', async () => {
    const made: Array<{ brokers: string[]; auth: KafkaAuth; closed: boolean }> = [];
    const clusters = new KafkaClusters(fake(made));
    const a = clusters.acquire(['k:9092'], {});
    const b = clusters.acquire(['k:9092'], {});
    const c = clusters.acquire(['k:9092'], { sasl: { mechanism: 'PLAIN', username: 'u', password: 'p' } });
    assert.equal(a.connector, b.connector);
    assert.notEqual(a.connector, c.connector);
    assert.equal(clusters.size, 2);
    await a.release();
    await a.release();
    assert.equal(made[0].closed, false, 'b still uses it (and a second release of a counts once)');
    await b.release();
    assert.equal(made[0].closed, true);
    assert.equal(clusters.size, 1);
    await clusters.close();
    assert.equal(made[1].closed, true);
  });

  it('takes the same brokers in another order for the same cluster', () => {
    const clusters = new KafkaClusters(fake([]));
    assert.equal(clusters.acquire(['j:9092', 'k:9092'], {}).connector, clusters.acquire(['k:9092', 'j:9092'], {}).connector);
    assert.equal(clusters.size, 1);
  });

  it("uses the install's broker unless the metadata or the secret says otherwise, and says why it cannot", async () => {
    const made: Array<{ brokers: string[]; auth: KafkaAuth; closed: boolean }> = [];
    const install = fake(made)(['install:9092'], {});
    const secrets: Record<string, Secret> = {
      'team/creds': { apiVersion: 'flint.dev/v1', kind: 'Secret', metadata: { name: 'creds', namespace: 'team', uid: 's', resourceVersion: '1', generation: 1, creationTimestamp: '2026-01-01T00:00:00Z' }, data: { sasl: 'scram_sha256', username: 'u', password: 'p' } },
      'team/broken': { apiVersion: 'flint.dev/v1', kind: 'Secret', metadata: { name: 'broken', namespace: 'team', uid: 's', resourceVersion: '1', generation: 1, creationTimestamp: '2026-01-01T00:00:00Z' }, data: { sasl: 'kerberos' } },
    };
    const from: KafkaTriggerSources = { install, installBrokers: ['install:9092'], clusters: new KafkaClusters(fake(made)), secret: async (ns, name) => secrets[`${ns}/${name}`] };
    const plain = await kafkaConnectorFor(trigger(), from);
    assert.ok(typeof plain !== 'string' && plain.connector === install);
    const own = await kafkaConnectorFor(trigger({ metadata: { bootstrapServers: 'a:1,b:2' } }), from);
    assert.ok(typeof own !== 'string');
    assert.deepEqual(made.at(-1), { brokers: ['a:1', 'b:2'], auth: {}, closed: false });
    const authed = await kafkaConnectorFor(trigger({ secret: 'creds' }), from);
    assert.ok(typeof authed !== 'string');
    assert.deepEqual(made.at(-1)?.brokers, ['install:9092'], 'credentials alone keep the install brokers');
    assert.equal(made.at(-1)?.auth.sasl?.mechanism, 'SCRAM-SHA-256');
    assert.equal(await kafkaConnectorFor(trigger({ secret: 'nope' }), from), "secret 'nope' does not exist in namespace 'team'");
    assert.match((await kafkaConnectorFor(trigger({ secret: 'broken' }), from)) as string, /^secret 'broken': 'sasl' must be/);
    assert.match((await kafkaConnectorFor(trigger(), { ...from, install: undefined })) as string, /no Kafka broker: set kafka.enabled=true/);
    assert.match((await kafkaConnectorFor(trigger({ secret: 'creds' }), { ...from, install: undefined })) as string, /no Kafka broker/, 'credentials alone need Kafka enabled');
    const same = await kafkaConnectorFor(trigger({ metadata: { bootstrapServers: 'install:9092' } }), from);
    assert.ok(typeof same !== 'string' && same.connector === install, "naming the install's own brokers shares its connector");
  });
});
