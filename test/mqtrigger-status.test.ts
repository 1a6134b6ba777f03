// A message-queue trigger's status as the CLI shows it, against a real server
// and real brokers: a trigger whose broker type the server has not configured
// waits and says what to set (and its create warns on stderr); a trigger on
// a running broker is consuming; stopping the broker shows the error, and the
// trigger consumes again once the broker is back.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { type LocalBroker, startNats, startRedis } from '../scripts/local-brokers.ts';
import type { MessageQueueTrigger } from '../src/api/kinds.ts';
import type { Connector } from '../src/mqtrigger/connector.ts';
import { NatsConnector } from '../src/mqtrigger/nats.ts';
import { RedisConnector } from '../src/mqtrigger/redis.ts';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

function cli(server: TestServer, work: string) {
  return (args: string[]) => {
    const r = flint(server, args, { cwd: work });
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    return r;
  };
}

/** The STATUS cell of trigger `name` in `flint mqt list` (the last column). */
function statusOf(server: TestServer, name: string): string {
  const lines = flint(server, ['mqt', 'list']).stdout.trimEnd().split('\n');
  const header = lines[0];
  const at = header.indexOf('STATUS');
  assert.ok(at > 0, header);
  const row = lines.find((l) => l.startsWith(`${name} `));
  return row === undefined ? '' : row.slice(at);
}

function triggerOf(server: TestServer, name: string): MessageQueueTrigger {
  return JSON.parse(flint(server, ['mqt', 'get', '--name', name, '-o', 'json']).stdout) as MessageQueueTrigger;
}

describe('message-queue trigger status', { timeout: 240_000 }, () => {
  it('a trigger whose broker type the server has not configured waits, naming the install values; its create warns on stderr', async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mqs-'));
    const server = await startServer({ sets: ['rabbitmq.enabled=false'] });
    try {
      const r = cli(server, work)(['mqt', 'create', '--name', 'q', '--function', 'worker', '--mqtype', 'rabbitmq', '--topic', 'jobs', '--contenttype', 'text/plain']);
      assert.match(r.stdout, /^trigger 'q' created$/m);
      assert.match(r.stderr, /^Warning: this server has no rabbitmq broker: set rabbitmq\.enabled=true and rabbitmq\.url, or the trigger's metadata host; the trigger is stored and starts consuming once one is configured$/m);
      await eventually(() => statusOf(server, 'q').startsWith('waiting:'), 'the trigger waiting', 20_000);
      assert.equal(statusOf(server, 'q'), "waiting: no rabbitmq broker: set rabbitmq.enabled=true and rabbitmq.url, or the trigger's metadata host");
      const header = flint(server, ['mqt', 'list']).stdout.split('\n')[0];
      assert.match(header, /\sMAX_RETRIES\s+PUB_MSG_CONTENT_TYPE\s+STATUS$/);
      assert.match(flint(server, ['mqt', 'list']).stdout, /^q .*\stext\/plain\s+waiting: /m);
      const t = triggerOf(server, 'q');
      assert.equal(t.status?.state, 'waiting');
      const shown = parse(flint(server, ['mqt', 'get', '--name', 'q']).stdout) as MessageQueueTrigger;
      assert.deepEqual(shown.status, t.status, 'mqt get shows the status');
      assert.match(t.status?.message ?? '', /^no rabbitmq broker: set rabbitmq\.enabled=true and rabbitmq\.url/);
      // A trigger that names its own server needs no broker of the install: no warning.
      const own = cli(server, work)(['mqt', 'create', '--name', 'own', '--function', 'worker', '--mqtype', 'rabbitmq', '--topic', 'jobs', '--metadata', 'host=amqp://127.0.0.1:1/']);
      assert.doesNotMatch(own.stderr, /rabbitmq\.enabled/);
      // An update leaves the status to the trigger manager.
      cli(server, work)(['mqt', 'update', '--name', 'q', '--maxretries', '2']);
      await eventually(() => triggerOf(server, 'q').status?.observedGeneration === 2, 'the status about the new spec', 20_000);
      assert.equal(triggerOf(server, 'q').status?.state, 'waiting');
    } finally {
      await server.stop();
      fs.rmSync(work, { recursive: true, force: true });
    }
  });

  const BROKERS: Array<{ mqtype: string; start(): Promise<LocalBroker>; sets(b: LocalBroker): string[]; connector(b: LocalBroker): Connector; error: RegExp }> = [
    {
      mqtype: 'redis',
      error: /^Redis server 127\.0\.0\.1:\d+: /,
      start: () => startRedis(),
      sets: (b) => ['redis.enabled=true', `redis.url=${b.url}`],
      connector: (b) => new RedisConnector({ url: b.url }),
    },
    {
      mqtype: 'nats-jetstream',
      error: /^lost the connection to the NATS server 127\.0\.0\.1:\d+; reconnecting$/,
      start: () => startNats(),
      sets: (b) => ['nats.enabled=true', `nats.servers=127.0.0.1:${b.port}`],
      connector: (b) => new NatsConnector({ servers: [`127.0.0.1:${b.port}`] }),
    },
  ];

  for (const c of BROKERS) {
    it(`${c.mqtype}: consuming; with the broker stopped, error with the last error; consuming again once it is back`, async () => {
      const broker = await c.start();
      const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mqs-'));
      const server = await startServer({ sets: c.sets(broker) });
      try {
        const ok = cli(server, work);
        fs.writeFileSync(path.join(work, 'fn.js'), "module.exports = async (ctx) => ({ status: 200, body: 'got ' + ctx.request.body.n });");
        ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
        ok(['fn', 'create', '--name', 'worker', '--env', 'nodejs', '--code', 'fn.js']);
        const created = ok(['mqt', 'create', '--name', 'q', '--function', 'worker', '--mqtype', c.mqtype, '--topic', 'jobs', '--resptopic', 'done']);
        assert.equal(created.stderr, '', 'no warning: the broker is configured');
        await eventually(() => statusOf(server, 'q') === 'consuming', 'consuming', 30_000);

        await broker.stop();
        await eventually(() => statusOf(server, 'q').startsWith('error: '), 'the error', 30_000);
        const failing = triggerOf(server, 'q').status;
        assert.equal(failing?.state, 'error');
        assert.match(failing?.lastError ?? '', c.error, 'the last error');
        assert.ok(failing?.lastErrorTime !== undefined && Date.now() - Date.parse(failing.lastErrorTime) < 60_000, `when it happened: ${failing?.lastErrorTime}`);
        assert.equal(statusOf(server, 'q'), `error: ${failing?.message}`);

        await broker.restart();
        await eventually(() => statusOf(server, 'q') === 'consuming', 'consuming again', 60_000);
        const back = triggerOf(server, 'q').status;
        assert.ok(back?.lastError, 'the last error is kept');
        const shown = parse(flint(server, ['mqt', 'get', '--name', 'q']).stdout) as MessageQueueTrigger;
        assert.equal(shown.status?.lastError, failing?.lastError, 'mqt get shows the last error');
        assert.equal(shown.status?.lastErrorTime, failing?.lastErrorTime, 'and when it happened');

        // Consuming for real: a message sent now is answered.
        const conn = c.connector(broker);
        try {
          const out: string[] = [];
          const sub = await conn.subscribe({ group: 'test', topic: 'done', onMessage: async (m) => void out.push(m.value.toString()) });
          await conn.publish('jobs', { value: JSON.stringify({ n: 2 }) });
          await eventually(() => out.length >= 1, 'the answer', 60_000);
          await sub.close();
          assert.deepEqual(out, ['got 2']);
        } finally {
          await conn.close();
        }
      } finally {
        await server.stop();
        await broker.stop();
        fs.rmSync(work, { recursive: true, force: true });
        fs.rmSync(broker.dir, { recursive: true, force: true });
      }
    });
  }
});
