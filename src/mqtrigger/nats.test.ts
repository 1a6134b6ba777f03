import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { AckPolicy, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { type LocalBroker, type NatsStartOptions, startNats } from '../../scripts/local-brokers.ts';
import { eventually } from '../testing/eventually.ts';
import { runConnectorContract } from './connector.contract.ts';
import { errorText } from './error-text.ts';
import { NatsConnector, type NatsOptions } from './nats.ts';

let nats: LocalBroker;
const server = () => nats.url.replace(/^nats:\/\//, '');
before(async () => {
  nats = await startNats();
});
after(async () => {
  await nats?.stop();
  if (nats) fs.rmSync(nats.dir, { recursive: true, force: true });
});

runConnectorContract('nats-jetstream', async () => new NatsConnector({ servers: [server()] }));

/** A JetStream manager on the test's own connection, and a connector to test, both closed after `body`. */
async function withManager(body: (jsm: Awaited<ReturnType<typeof jetstreamManager>>, c: NatsConnector) => Promise<void>): Promise<void> {
  const nc = await connect({ servers: [server()] });
  const c = new NatsConnector({ servers: [server()] });
  try {
    await body(await jetstreamManager(nc), c);
  } finally {
    await c.close();
    await nc.close();
  }
}

/** A NATS server of the test's own and the connectors `body` opens to it, all gone afterwards. */
async function withOwnNats(opts: NatsStartOptions, body: (b: LocalBroker, open: (o: NatsOptions) => NatsConnector) => Promise<void>): Promise<void> {
  const broker = await startNats(opts);
  const opened: NatsConnector[] = [];
  try {
    await body(broker, (o) => {
      const c = new NatsConnector(o);
      opened.push(c);
      return c;
    });
  } finally {
    for (const c of opened) await c.close();
    await broker.stop();
    fs.rmSync(broker.dir, { recursive: true, force: true });
  }
}

/** Publishes `value` to `topic` and reads the topic in `group`: `expected` (default: just `value`). */
async function roundTrip(c: NatsConnector, topic: string, group: string, value: string, expected = [value]): Promise<void> {
  await c.publish(topic, { value });
  const got: string[] = [];
  const sub = await c.subscribe({ group, topic, onMessage: async (m) => void got.push(m.value.toString()) });
  await eventually(() => got.length >= expected.length, 'the messages', 20_000);
  await sub.close();
  assert.deepEqual(got, expected);
}

describe('NATS JetStream connector with streams and consumers made by others', { timeout: 60_000 }, () => {
  it("consumes from and publishes to the stream that already holds a subject, making no stream of its own", async () => {
    await withManager(async (jsm, c) => {
      await jsm.streams.add({ name: 'ORDERS', subjects: ['orders.>'] });
      await c.publish('orders.created', { value: 'one' });
      await c.publish('orders.answered', { value: 'reply' });
      const got: string[] = [];
      const sub = await c.subscribe({ group: 'orders-worker', topic: 'orders.created', onMessage: async (m) => void got.push(m.value.toString()) });
      await eventually(() => got.length >= 1, 'the message', 20_000);
      await sub.close();
      assert.deepEqual(got, ['one'], 'only the topic, not the stream\'s other subjects');
      const names: string[] = [];
      for await (const n of jsm.streams.names()) names.push(n);
      assert.deepEqual(names.filter((n) => /orders/i.test(n)), ['ORDERS']);
      assert.equal((await jsm.streams.info('ORDERS')).state.messages, 2);
      assert.equal((await jsm.consumers.info('ORDERS', 'orders-worker')).config.filter_subject, 'orders.created');
    });
  });

  it('uses an existing pull consumer of the topic, and refuses one that would lose or mix messages, saying why', async () => {
    await withManager(async (jsm, c) => {
      await jsm.streams.add({ name: 'JOBS', subjects: ['jobs.>'] });
      await jsm.consumers.add('JOBS', { durable_name: 'fine', ack_policy: AckPolicy.Explicit, filter_subject: 'jobs.new' });
      await jsm.consumers.add('JOBS', { durable_name: 'pushed', ack_policy: AckPolicy.Explicit, deliver_subject: 'elsewhere', filter_subject: 'jobs.new' });
      await jsm.consumers.add('JOBS', { durable_name: 'no-acks', ack_policy: AckPolicy.None, filter_subject: 'jobs.new' });
      await jsm.consumers.add('JOBS', { durable_name: 'everything', ack_policy: AckPolicy.Explicit });
      await roundTrip(c, 'jobs.new', 'fine', 'j');
      const refuse = (group: string) => c.subscribe({ group, topic: 'jobs.new', onMessage: async () => {} });
      await assert.rejects(refuse('pushed'), /consumer 'pushed' of stream 'JOBS' is a push consumer/);
      await assert.rejects(refuse('no-acks'), /consumer 'no-acks' of stream 'JOBS' acknowledges with 'none': Flint needs explicit acks/);
      await assert.rejects(refuse('everything'), /consumer 'everything' of stream 'JOBS' reads 'jobs.>', not just the topic 'jobs.new'/);
    });
  });

  it('logs in with a user and password', async () => {
    await withOwnNats({ auth: { user: 'flint', pass: 's3cret' } }, async (guarded, open) => {
      const url = guarded.url.replace(/^nats:\/\//, '');
      await roundTrip(open({ servers: [url], user: 'flint', pass: 's3cret' }), 'in', 'g', 'v');
      await assert.rejects(open({ servers: [url], user: 'flint', pass: 'wrong' }).publish('in', { value: 'v' }), /Authorization/i);
    });
  });
});

describe('NATS JetStream connector over TLS', { timeout: 60_000 }, () => {
  it("talks TLS with the CA and client certificate it is given, and a server's refusal says what is missing", async () => {
    await withOwnNats({ tls: true }, async (secure, open) => {
      const tls = secure.tls!;
      await roundTrip(open({ servers: [tls.url], tls: { ca: tls.ca, cert: tls.client.cert, key: tls.client.key } }), 'secure', 'g', 'v');
      const noClientCert = open({ servers: [tls.url], tls: { ca: tls.ca } });
      await assert.rejects(noClientCert.publish('secure', { value: 'v' }), (err: Error) => /refused the TLS connection: .*the server refused the client certificate, or wants one: put one it trusts in the trigger secret's cert and key/.test(errorText(err)));
      const systemCas = open({ servers: [tls.url] });
      await assert.rejects(systemCas.publish('secure', { value: 'v' }), (err: Error) => /not from a CA the trigger trusts/.test(errorText(err)));
    });
  });
});

describe('NATS JetStream connector when streams change under it', { timeout: 60_000 }, () => {
  it('finds the stream holding a topic again after the one it used was deleted and another took the subject', async () => {
    await withManager(async (jsm, c) => {
      await jsm.streams.add({ name: 'FIRST', subjects: ['moved.here'] });
      await c.publish('moved.here', { value: 'before' });
      await jsm.streams.delete('FIRST');
      await jsm.streams.add({ name: 'SECOND', subjects: ['moved.>'] });
      await c.publish('moved.here', { value: 'after' });
      assert.equal((await jsm.streams.info('SECOND')).state.messages, 1, 'published into the stream that holds the subject now');
      await roundTrip(c, 'moved.here', 'g', 'after2', ['after', 'after2']);
    });
  });
});
