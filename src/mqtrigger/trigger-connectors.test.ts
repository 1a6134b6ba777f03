import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KafkaAuth } from '../api/kafka-trigger.ts';
import type { MessageQueueTrigger, Secret } from '../api/kinds.ts';
import type { TlsMaterial } from '../api/tls-secret.ts';
import type { Connector } from './connector.ts';
import { connectorFor, SharedConnectors, type TriggerConnectorSources } from './trigger-connectors.ts';

interface Made {
  what: string;
  closed: boolean;
}

/** A connector that only records what it was made for and whether it was closed. */
function fake(made: Made[], what: string): Connector {
  const rec = { what, closed: false };
  made.push(rec);
  return {
    subscribe: () => Promise.reject(new Error('not here')),
    publish: async () => {},
    ensureTopic: async () => {},
    close: async () => {
      rec.closed = true;
    },
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

function secret(name: string, data: Record<string, string>): Secret {
  return { apiVersion: 'flint.dev/v1', kind: 'Secret', metadata: { name, namespace: 'team', uid: 's', resourceVersion: '1', generation: 1, creationTimestamp: '2026-01-01T00:00:00Z' }, data };
}

function sources(made: Made[], install: TriggerConnectorSources['install']): TriggerConnectorSources {
  const secrets: Record<string, Secret> = {
    'team/creds': secret('creds', { sasl: 'scram_sha256', username: 'u', password: 'p' }),
    'team/broken': secret('broken', { sasl: 'kerberos' }),
    'team/amqp': secret('amqp', { host: 'amqp://rabbit.example:5672/', username: 'alice', password: 'p@ss' }),
    'team/redis-pw': secret('redis-pw', { password: 's3cret' }),
    'team/mtls': secret('mtls', { tls: 'enable', ca: 'CA', cert: 'CERT', key: 'KEY' }),
    'team/mtls-other': secret('mtls-other', { tls: 'enable', ca: 'CA', cert: 'CERT2', key: 'KEY2' }),
    'team/half-tls': secret('half-tls', { tls: 'enable', cert: 'CERT' }),
    'team/nats-user': secret('nats-user', { username: 'nu', password: 'np' }),
    'team/nats-half': secret('nats-half', { username: 'nu' }),
  };
  return {
    install,
    installKafkaBrokers: ['install:9092'],
    shared: new SharedConnectors(),
    secret: async (ns: string, name: string) => secrets[`${ns}/${name}`],
    makeKafka: (brokers: string[], auth: KafkaAuth) => fake(made, `kafka ${brokers.join(',')} ${auth.sasl?.mechanism ?? 'no sasl'}`),
    makeRabbit: (url: string, tls: TlsMaterial | undefined) => fake(made, `rabbitmq ${url}${tls ? ` tls ${tls.cert ?? '-'}` : ''}`),
    makeRedis: (url: string, tls: TlsMaterial | undefined) => fake(made, `redis ${url}${tls ? ` tls ${tls.cert ?? '-'}` : ''}`),
    makeNats: ({ servers, auth, tls }) => fake(made, `nats ${servers.join(',')}${auth ? ` as ${auth.user ?? auth.token}` : ''}${tls ? ` tls ${tls.cert ?? '-'}` : ''}`),
  };
}

describe('connectors per trigger', () => {
  it('shares one connector per key and closes it when the last user lets go', async () => {
    const made: Made[] = [];
    const shared = new SharedConnectors();
    const a = shared.acquire('k', () => fake(made, 'k'));
    const b = shared.acquire('k', () => fake(made, 'k'));
    const c = shared.acquire('other', () => fake(made, 'other'));
    assert.equal(a.connector, b.connector);
    assert.notEqual(a.connector, c.connector);
    assert.equal(shared.size, 2);
    await a.release();
    await a.release();
    assert.equal(made[0].closed, false, 'b still uses it (and a second release of a counts once)');
    await b.release();
    assert.equal(made[0].closed, true);
    assert.equal(shared.size, 1);
    await shared.close();
    assert.equal(made[1].closed, true);
  });

  it("gives a Kafka trigger the install's broker unless its metadata or secret says otherwise, and says why it cannot", async () => {
    const made: Made[] = [];
    const install = fake(made, 'install');
    const from = sources(made, { kafka: install });
    const lease = async (t: MessageQueueTrigger, f = from) => {
      const got = await connectorFor(t, f);
      assert.ok(typeof got !== 'string', String(got));
      return got;
    };
    assert.equal((await lease(trigger())).connector, install);
    await lease(trigger({ metadata: { bootstrapServers: 'b:2,a:1' } }));
    assert.equal(made.at(-1)?.what, 'kafka b:2,a:1 no sasl');
    const count = made.length;
    await lease(trigger({ metadata: { bootstrapServers: 'a:1,b:2' } }));
    assert.equal(made.length, count, 'the same brokers in another order share the connector');
    await lease(trigger({ secret: 'creds' }));
    assert.equal(made.at(-1)?.what, 'kafka install:9092 SCRAM-SHA-256', 'credentials alone keep the install brokers');
    assert.equal((await lease(trigger({ metadata: { bootstrapServers: 'install:9092' } }))).connector, install, "naming the install's own brokers shares its connector");
    assert.equal(await connectorFor(trigger({ secret: 'nope' }), from), "secret 'nope' does not exist in namespace 'team'");
    assert.match((await connectorFor(trigger({ secret: 'broken' }), from)) as string, /^secret 'broken': 'sasl' must be/);
    const none = sources(made, {});
    assert.match((await connectorFor(trigger(), none)) as string, /no Kafka broker: set kafka.enabled=true/);
    assert.match((await connectorFor(trigger({ secret: 'creds' }), none)) as string, /no Kafka broker/, 'credentials alone need Kafka enabled');
  });

  it("gives RabbitMQ and Redis triggers the server their metadata or secret names, with the secret's credentials", async () => {
    const made: Made[] = [];
    const from = sources(made, {});
    const rabbit = (spec: Partial<MessageQueueTrigger['spec']>) => connectorFor(trigger({ messageQueueType: 'rabbitmq', ...spec }), from);
    const redis = (spec: Partial<MessageQueueTrigger['spec']>) => connectorFor(trigger({ messageQueueType: 'redis', ...spec }), from);
    assert.ok(typeof (await rabbit({ secret: 'amqp', metadata: { vhostName: 'orders' } })) !== 'string');
    assert.equal(made.at(-1)?.what, 'rabbitmq amqp://alice:p%40ss@rabbit.example:5672/orders');
    assert.ok(typeof (await rabbit({ metadata: { host: 'amqps://mq.example/' } })) !== 'string');
    assert.equal(made.at(-1)?.what, 'rabbitmq amqps://mq.example/');
    assert.ok(typeof (await redis({ secret: 'redis-pw', metadata: { address: 'cache.example:6380', databaseIndex: '2', enableTLS: 'true' } })) !== 'string');
    assert.equal(made.at(-1)?.what, 'redis rediss://:s3cret@cache.example:6380/2 tls -', 'enableTLS turns TLS on with the system CAs when the secret has none');
    assert.match((await rabbit({})) as string, /^no rabbitmq broker: set rabbitmq.enabled=true and rabbitmq.url, or the trigger's metadata host$/);
    assert.match((await redis({ metadata: { consumerGroup: 'g' } })) as string, /^no redis broker/);
    assert.match((await connectorFor(trigger({ messageQueueType: 'nats-jetstream' }), from)) as string, /^no nats-jetstream broker: set nats.enabled=true/);
  });

  it('gives a NATS trigger the servers its natsServer names, shared per servers and credentials, else the install\'s', async () => {
    const made: Made[] = [];
    const install = fake(made, 'install nats');
    const from = sources(made, { 'nats-jetstream': install });
    const nats = (spec: Partial<MessageQueueTrigger['spec']>) => connectorFor(trigger({ messageQueueType: 'nats-jetstream', ...spec }), from);
    assert.equal(((await nats({})) as { connector: Connector }).connector, install);
    assert.equal(((await nats({ secret: 'nats-user' })) as { connector: Connector }).connector, install, "credentials alone keep the install's servers");
    const a = (await nats({ metadata: { natsServer: 'a:4222,b:4222' } })) as { connector: Connector };
    assert.equal(made.at(-1)?.what, 'nats a:4222,b:4222');
    const b = (await nats({ metadata: { natsServer: 'b:4222, a:4222', consumer: 'c' } })) as { connector: Connector };
    assert.equal(a.connector, b.connector, 'the same servers in another order share the connector');
    const c = (await nats({ secret: 'nats-user', metadata: { natsServer: 'a:4222,b:4222' } })) as { connector: Connector };
    assert.notEqual(c.connector, a.connector, 'other credentials, another connection');
    assert.equal(made.at(-1)?.what, 'nats a:4222,b:4222 as nu');
    await nats({ secret: 'mtls', metadata: { natsServer: 'a:4222' } });
    assert.equal(made.at(-1)?.what, 'nats a:4222 tls CERT');
    assert.equal(await nats({ secret: 'nats-half', metadata: { natsServer: 'a:4222' } }), "secret 'nats-half': 'username' and 'password' go together");
    assert.equal(await connectorFor(trigger({ messageQueueType: 'nats-jetstream' }), sources(made, {})), "no nats-jetstream broker: set nats.enabled=true and nats.servers, or the trigger's metadata natsServer");
  });

  it("hands the secret's TLS material to RabbitMQ and Redis connectors, one connector per server and material", async () => {
    const made: Made[] = [];
    const from = sources(made, {});
    const get = (type: 'rabbitmq' | 'redis', secretName: string) =>
      connectorFor(trigger({ messageQueueType: type, secret: secretName, metadata: type === 'rabbitmq' ? { host: 'amqps://mq.example/' } : { address: 'cache.example:6380' } }), from);
    const a = await get('rabbitmq', 'mtls');
    const b = await get('rabbitmq', 'mtls');
    const c = await get('rabbitmq', 'mtls-other');
    assert.ok(typeof a !== 'string' && typeof b !== 'string' && typeof c !== 'string');
    assert.equal(a.connector, b.connector);
    assert.notEqual(a.connector, c.connector, 'another client certificate is another connection');
    assert.deepEqual(
      made.map((m) => m.what),
      ['rabbitmq amqps://mq.example/ tls CERT', 'rabbitmq amqps://mq.example/ tls CERT2'],
    );
    assert.ok(typeof (await get('redis', 'mtls')) !== 'string');
    assert.equal(made.at(-1)?.what, 'redis rediss://cache.example:6380 tls CERT');
    assert.equal(await get('redis', 'half-tls'), "secret 'half-tls': 'cert' and 'key' go together");
  });
});
