// Message-queue triggers through NATS JetStream, RabbitMQ and Redis Streams: the same
// flow as with Kafka, with real brokers from Debian's packages.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { type BrokerTls, type LocalBroker, type StartOptions, startNats, startRabbit, startRedis } from '../scripts/local-brokers.ts';
import type { Connector } from '../src/mqtrigger/connector.ts';
import { NatsConnector } from '../src/mqtrigger/nats.ts';
import { RabbitConnector } from '../src/mqtrigger/rabbitmq.ts';
import { RedisConnector } from '../src/mqtrigger/redis.ts';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { createClient } from '@redis/client';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

interface Case {
  mqtype: string;
  start(opts?: StartOptions): Promise<LocalBroker>;
  sets(b: LocalBroker): string[];
  connector(b: LocalBroker): Connector;
  /** KEDA metadata naming the broker (and a group) on the trigger itself, for types whose metadata Flint reads. */
  metadata?(b: LocalBroker): string[];
  /** The consumer groups reading the topic `jobs`, for types whose metadata names its group (`team-jobs` here). */
  groups?(b: LocalBroker): Promise<string[]>;
  /** KEDA metadata naming the broker's TLS listener, for types that take TLS material from the trigger's secret. */
  tlsMetadata?(tls: BrokerTls): string[];
}

const CASES: Case[] = [
  {
    mqtype: 'nats-jetstream',
    start: () => startNats(),
    sets: (b) => ['nats.enabled=true', `nats.servers=127.0.0.1:${b.port}`],
    connector: (b) => new NatsConnector({ servers: [`127.0.0.1:${b.port}`] }),
    metadata: (b) => [`natsServer=${b.url}`, 'consumer=team-jobs', 'stream=FLINT_jobs'],
    async groups(b) {
      const nc = await natsConnect({ servers: [b.url] });
      try {
        const jsm = await jetstreamManager(nc);
        const names: string[] = [];
        for await (const c of jsm.consumers.list(await jsm.streams.find('jobs'))) names.push(c.name);
        return names;
      } finally {
        await nc.close();
      }
    },
  },
  {
    mqtype: 'rabbitmq',
    start: startRabbit,
    sets: (b) => ['rabbitmq.enabled=true', `rabbitmq.url=${b.url}`],
    connector: (b) => new RabbitConnector({ url: b.url }),
    metadata: (b) => [`host=${b.url}`, 'queueName=jobs'],
    tlsMetadata: (tls) => [`host=${tls.url}`, 'queueName=jobs'],
  },
  {
    mqtype: 'redis',
    start: startRedis,
    sets: (b) => ['redis.enabled=true', `redis.url=${b.url}`],
    connector: (b) => new RedisConnector({ url: b.url }),
    metadata: (b) => [`address=127.0.0.1:${b.port}`, 'stream=jobs', 'consumerGroup=team-jobs'],
    async groups(b) {
      const client = createClient({ url: b.url });
      await client.connect();
      try {
        return ((await client.xInfoGroups('jobs')) as Array<{ name: string }>).map((g) => g.name);
      } finally {
        await client.quit();
      }
    },
    tlsMetadata: (tls) => [`address=127.0.0.1:${tls.port}`, 'stream=jobs'],
  },
];

interface Setup {
  broker: LocalBroker;
  server: TestServer;
  conn: Connector;
  work: string;
  /** Runs the CLI against the server; fails the test on a non-zero exit. */
  ok(args: string[]): void;
}

/** A fresh broker, a server (with `sets`), a connector of the test's own and a work directory, all gone afterwards. */
async function withBroker(c: Case, sets: (b: LocalBroker) => string[], body: (s: Setup) => Promise<void>, start?: StartOptions): Promise<void> {
  const broker = await c.start(start);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mq-'));
  const server = await startServer({ sets: sets(broker) });
  const conn = c.connector(broker);
  try {
    const ok = (args: string[]) => {
      const r = flint(server, args, { cwd: work });
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    };
    await body({ broker, server, conn, work, ok });
  } finally {
    await conn.close();
    await server.stop();
    await broker.stop();
    fs.rmSync(work, { recursive: true, force: true });
    fs.rmSync(broker.dir, { recursive: true, force: true });
  }
}

/** Function `worker`, answering `<prefix> <n>` to a message `{n}`, on a one-worker environment. */
function deployWorker(work: string, ok: Setup['ok'], prefix: string): void {
  fs.writeFileSync(path.join(work, 'fn.js'), `module.exports = async (ctx) => ({ status: 200, body: '${prefix} ' + ctx.request.body.n });`);
  ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
  ok(['fn', 'create', '--name', 'worker', '--env', 'nodejs', '--code', 'fn.js']);
}

/** Sends `{n}` to the topic `jobs` and returns the one answer on `done`. */
async function answerTo(conn: Connector, n: number): Promise<string> {
  const out: string[] = [];
  const sub = await conn.subscribe({ group: 'test', topic: 'done', onMessage: async (m) => void out.push(m.value.toString()) });
  try {
    await conn.publish('jobs', { value: JSON.stringify({ n }) });
    await eventually(() => out.length >= 1, 'the answer', 60_000);
  } finally {
    await sub.close();
  }
  assert.equal(out.length, 1, `one answer, got ${JSON.stringify(out)}`);
  return out[0];
}

for (const c of CASES) {
  describe(`message-queue triggers with ${c.mqtype}`, { timeout: 180_000 }, () => {
    it('sends answers to the response topic and failures to the error topic, retrying first', async () => {
      await withBroker(c, c.sets, async ({ server, conn, work, ok }) => {
        fs.writeFileSync(path.join(work, 'fn.js'), `module.exports = async (ctx) => {
          console.log('called with ' + ctx.request.body.n);
          return ctx.request.body.fail ? { status: 422, body: 'no' } : { status: 200, body: 'got ' + ctx.request.body.n + ' on ' + ctx.request.headers['x-flint-mqtrigger-topic'] };
        };`);
        ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
        ok(['fn', 'create', '--name', 'worker', '--env', 'nodejs', '--code', 'fn.js']);
        ok(['mqt', 'create', '--name', 'q', '--function', 'worker', '--mqtype', c.mqtype, '--topic', 'jobs', '--resptopic', 'done', '--errortopic', 'failed', '--maxretries', '1']);
        const out: string[] = [];
        const errs: string[] = [];
        const s1 = await conn.subscribe({ group: 'test', topic: 'done', onMessage: async (m) => void out.push(m.value.toString()) });
        const s2 = await conn.subscribe({ group: 'test', topic: 'failed', onMessage: async (m) => void errs.push(m.value.toString()) });
        await conn.publish('jobs', { key: 'k', value: JSON.stringify({ n: 1 }) });
        await conn.publish('jobs', { value: JSON.stringify({ n: 2, fail: true }) });
        await conn.publish('jobs', { value: JSON.stringify({ n: 3 }) });
        await eventually(() => out.length >= 2 && errs.length >= 1, 'answers and the failure', 60_000);
        assert.deepEqual(out, ['got 1 on jobs', 'got 3 on jobs'], 'in order');
        assert.deepEqual(errs, ['Request returned failure: 422']);
        // The function's output reaches its log on its own time: wait for both lines, then count.
        const calls = () => flint(server, ['fn', 'log', '--name', 'worker'], { cwd: work }).stdout.split('\n').filter((l) => l.includes('called with 2')).length;
        await eventually(() => calls() >= 2, "both calls' lines in fn log");
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(calls(), 2, 'called 1 + maxRetries times');
        await s1.close();
        await s2.close();
      });
    });

    const metadata = c.metadata;
    if (metadata !== undefined) {
      it('consumes from the server its KEDA metadata names, on a server with no such broker configured', async () => {
        await withBroker(c, () => [], async ({ broker, conn, work, ok }) => {
          deployWorker(work, ok, 'own');
          ok(['mqt', 'create', '--name', 'own', '--function', 'worker', '--mqtype', c.mqtype, '--topic', 'jobs', '--resptopic', 'done', ...metadata(broker).flatMap((m) => ['--metadata', m])]);
          assert.equal(await answerTo(conn, 7), 'own 7');
          if (c.groups !== undefined) {
            const groups = await c.groups(broker);
            assert.ok(groups.includes('team-jobs'), `the group named in the metadata consumes (${groups.join(', ')})`);
          }
        });
      });
    }

    const tlsMetadata = c.tlsMetadata;
    if (tlsMetadata !== undefined) {
      it("consumes over TLS from the server its metadata names, with the CA and client certificate of its secret", async () => {
        await withBroker(
          c,
          () => [],
          async ({ broker, conn, work, ok }) => {
            const tls = broker.tls!;
            const files = { ca: tls.ca, cert: tls.client.cert, key: tls.client.key };
            for (const [k, v] of Object.entries(files)) fs.writeFileSync(path.join(work, `${k}.pem`), v);
            const fromFiles = Object.keys(files).flatMap((k) => ['--from-file', `${k}=${path.join(work, `${k}.pem`)}`]);
            ok(['secret', 'create', '--name', 'mq-tls', '--from-literal', 'tls=enable', ...fromFiles]);
            deployWorker(work, ok, 'tls');
            const metadata = tlsMetadata(tls).flatMap((m) => ['--metadata', m]);
            ok(['mqt', 'create', '--name', 'secure', '--function', 'worker', '--mqtype', c.mqtype, '--topic', 'jobs', '--resptopic', 'done', '--secret', 'mq-tls', ...metadata]);
            // The test's own connector reaches the same broker on its plain listener.
            assert.equal(await answerTo(conn, 9), 'tls 9');
          },
          { tls: true },
        );
      });
    }
  });
}
