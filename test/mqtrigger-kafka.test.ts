// Message-queue triggers against a real Apache Kafka broker (KRaft mode,
// from Maven Central), with the real server, CLI and sandboxed functions.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Admin } from '@platformatic/kafka';
import { type KafkaBroker, startKafka } from '../scripts/kafka-broker.ts';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let kafka: KafkaBroker;
let server: TestServer;
let work: string;
let dataDir: string;

function ok(args: string[]): string {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function code(name: string, text: string): string {
  const f = path.join(work, `${name}.js`);
  fs.writeFileSync(f, text);
  return f;
}

async function produce(topic: string, value: string, key?: string): Promise<void> {
  const res = await fetch(`${server.controllerUrl}/topics/${topic}/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ key, value }),
  });
  assert.equal(res.status, 204, await res.text());
}

/** Reads the group's next message; undefined on the endpoint's 408. */
async function readOne(topic: string, group: string): Promise<{ key: string | null; value: string; partition: number; offset: number } | undefined> {
  const res = await fetch(`${server.controllerUrl}/topics/${topic}/messages?group=${group}`);
  if (res.status === 408) {
    assert.deepEqual(await res.json(), { error: 'long polling timeout' });
    return undefined;
  }
  assert.equal(res.status, 200, await res.clone().text());
  const m = (await res.json()) as { key: string | null; value: string; partition: number; offset: number };
  assert.equal(typeof m.partition, 'number');
  assert.equal(typeof m.offset, 'number');
  return { ...m, value: Buffer.from(m.value, 'base64').toString('utf8') };
}

/** Consumer groups the broker knows. */
async function listGroups(brokers: string): Promise<string[]> {
  const admin = new Admin({ clientId: 'flint-test', bootstrapBrokers: [brokers] });
  try {
    return [...(await admin.listGroups()).keys()];
  } finally {
    await admin.close();
  }
}

async function readUntil(topic: string, group: string, count: number, timeoutMs = 60_000): Promise<string[]> {
  const got: string[] = [];
  const deadline = Date.now() + timeoutMs;
  while (got.length < count && Date.now() < deadline) {
    const m = await readOne(topic, group);
    if (m) got.push(m.value);
  }
  return got;
}

describe('message-queue triggers with Kafka', { timeout: 600_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mqt-'));
    dataDir = path.join(work, 'data');
    kafka = await startKafka({ saslUsers: { alice: 'alice-secret' }, tls: true });
    server = await startServer({ dataDir, sets: ['kafka.enabled=true', `kafka.brokers=${kafka.brokers}`] });
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
  });
  after(async () => {
    await server?.stop();
    await kafka?.destroy();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it("runs the product document's example: input -> consumer -> output, then failures to error", async () => {
    // The example's producer publishes to the input topic. Not from a function: functions cannot reach the
    // control plane (or a broker on this host), whatever their network (DESIGN section 5, Trust), so the test
    // publishes through the control plane's produce endpoint itself.
    ok(['fn', 'create', '--name', 'consumer', '--env', 'nodejs', '--code', code('consumer', `
      module.exports = async (context) => {
        const b = context.request.body;
        return { status: 200, body: 'Consumer got: ' + b.message + ' via ' + context.request.headers['x-flint-mqtrigger-topic'] };
      };`)]);
    ok(['mqt', 'create', '--name', 'kafkatest', '--function', 'consumer', '--mqtype', 'kafka', '--topic', 'input', '--resptopic', 'output', '--errortopic', 'error']);
    const list = ok(['mqt', 'list']);
    assert.match(list, /^NAME\s+FUNCTION_NAME\s+MESSAGE_QUEUE_TYPE\s+TOPIC\s+RESPONSE_TOPIC\s+ERROR_TOPIC\s+MAX_RETRIES\s+PUB_MSG_CONTENT_TYPE\s+STATUS$/m);
    assert.match(list, /^kafkatest\s+consumer\s+kafka\s+input\s+output\s+error\s+0\s+application\/json\s+(pending|consuming)$/m);
    await eventually(() => /^kafkatest\s.*\sconsuming$/m.test(ok(['mqt', 'list'])), 'the trigger consuming');
    await produce('input', JSON.stringify({ message: 'Hello from the producer' }));
    assert.deepEqual(await readUntil('output', 'verify', 1), ['Consumer got: Hello from the producer via input']);

    ok(['fn', 'update', '--name', 'consumer', '--code', code('consumer400', 'module.exports = async () => ({ status: 400, body: "bad" });')]);
    // Let the update reach the executor before the next message.
    await eventually(async () => (await fetch(`${server.routerUrl}/flint-function/consumer`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status === 400, 'the updated consumer');
    await produce('input', JSON.stringify({ message: 'Hello from the producer' }));
    assert.deepEqual(await readUntil('error', 'verify', 1), ['Request returned failure: 400']);
    await eventually(() => ok(['fn', 'log', '--name', 'consumer']).length > 0, 'consumer log');
  });

  it('calls the function exactly 1 + maxRetries times before giving up', async () => {
    ok(['fn', 'create', '--name', 'flaky', '--env', 'nodejs', '--code', code('flaky', `
      module.exports = async (context) => { console.log('attempt for ' + context.request.body.id); return { status: 503, body: 'no' }; };`)]);
    ok(['mqt', 'create', '--name', 'retries', '--function', 'flaky', '--topic', 'retry-in', '--errortopic', 'retry-err', '--maxretries', '2']);
    await produce('retry-in', JSON.stringify({ id: 'r1' }));
    assert.deepEqual(await readUntil('retry-err', 'verify', 1), ['Request returned failure: 503']);
    // The function's output reaches its log on its own time: wait for the third attempt's line, then count.
    const log = await eventually(() => {
      const text = ok(['fn', 'log', '--name', 'flaky']);
      return text.split('\n').filter((l) => l.includes('attempt for r1')).length >= 3 ? text : undefined;
    }, "the three attempts' lines in fn log");
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(ok(['fn', 'log', '--name', 'flaky']).split('\n').filter((l) => l.includes('attempt for r1')).length, 3, log);
  });

  it("takes kafka-pixy's produce form (raw body, ?key=) beside its own, keeping a null key null", async () => {
    const pixy = await fetch(`${server.controllerUrl}/topics/pixy/messages?key=bar&sync`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'Good news everyone!' });
    assert.equal(pixy.status, 200, await pixy.clone().text());
    assert.deepEqual(await pixy.json(), {});
    assert.equal(ok(['topic', 'produce', '--topic', 'pixy', '--value', 'no key']), "message sent to 'pixy'\n");
    const first = await eventually(() => readOne('pixy', 'pixy-check'), 'the kafka-pixy message', 30_000);
    assert.deepEqual([first.key, first.value], ['bar', 'Good news everyone!']);
    const second = await eventually(() => readOne('pixy', 'pixy-check'), 'the CLI message', 30_000);
    assert.deepEqual([second.key, second.value], [null, 'no key']);
  });

  it('works without an error topic, and stops consuming when the trigger is deleted', async () => {
    ok(['fn', 'create', '--name', 'echo', '--env', 'nodejs', '--code', code('echo', 'module.exports = async (c) => ({ status: c.request.body.fail ? 500 : 200, body: "echo " + c.request.body.n });')]);
    ok(['mqt', 'create', '--name', 'echoes', '--function', 'echo', '--topic', 'echo-in', '--resptopic', 'echo-out']);
    await produce('echo-in', JSON.stringify({ n: 0, fail: true }));
    assert.equal(ok(['topic', 'produce', '--topic', 'echo-in', '--value', JSON.stringify({ n: 1 })]), "message sent to 'echo-in'\n");
    const read = await eventually(() => {
      const r = flint(server, ['topic', 'read', '--topic', 'echo-out', '--group', 'cli'], { cwd: work });
      return r.code === 0 ? r.stdout : undefined;
    }, 'flint topic read', 60_000);
    assert.equal(read, 'echo 1\n', 'a failure with no error topic is dropped and the next message flows');
    ok(['mqt', 'delete', '--name', 'echoes']);
    await new Promise((r) => setTimeout(r, 1000));
    await produce('echo-in', JSON.stringify({ n: 2 }));
    assert.equal(await readOne('echo-out', 'cli'), undefined, 'nothing is consumed after the trigger is deleted');
    assert.equal(await readOne('echo-out', 'cli'), undefined);
  });

  it("takes its cluster, consumer group and SASL credentials from KEDA metadata and a secret, as Fission's connectors do", async () => {
    ok(['fn', 'create', '--name', 'keda', '--env', 'nodejs', '--code', code('keda', 'module.exports = async (c) => ({ status: 200, body: "keda got " + c.request.body.n });')]);
    ok(['secret', 'create', '--name', 'kafka-creds', '--from-literal', 'sasl=plaintext', '--from-literal', 'username=alice', '--from-literal', 'password=alice-secret']);
    ok(['secret', 'create', '--name', 'wrong-creds', '--from-literal', 'sasl=plaintext', '--from-literal', 'username=alice', '--from-literal', 'password=guess']);
    const sasl = kafka.saslBrokers!;
    // The same broker's SASL-only listener: the install's plain one is not what this trigger uses.
    ok(['mqt', 'create', '--name', 'keda', '--function', 'keda', '--topic', 'keda-in', '--resptopic', 'keda-out', '--secret', 'kafka-creds',
      '--metadata', `bootstrapServers=${sasl}`, '--metadata', 'consumerGroup=team-keda', '--metadata', 'topic=keda-in', '--metadata', 'lagThreshold=5']);
    ok(['mqt', 'create', '--name', 'keda-refused', '--function', 'keda', '--topic', 'keda-in', '--resptopic', 'keda-refused-out', '--secret', 'wrong-creds', '--metadata', `bootstrapServers=${sasl}`]);
    await produce('keda-in', JSON.stringify({ n: 1 }));
    assert.deepEqual(await readUntil('keda-out', 'verify', 1), ['keda got 1']);
    const groups = await listGroups(kafka.brokers);
    assert.ok(groups.includes('team-keda'), `the group named in the metadata consumes (groups: ${groups.join(', ')})`);
    assert.ok(!groups.includes('flint-mqt-default-keda'));
    // The broker's refusal reaches the log, not only the client library's "failed 6 times".
    await eventually(() => /keda-refused.*SASL authentication failed/.test(server.output()), 'the refused credentials in the server log', 60_000);
    assert.equal(await readOne('keda-refused-out', 'verify'), undefined, 'a trigger the broker refuses consumes nothing');
    // Bad metadata is refused at the API, naming the key.
    const bad = flint(server, ['mqt', 'create', '--name', 'keda-bad', '--function', 'keda', '--topic', 'keda-in', '--metadata', 'offsetResetPolicy=newest'], { cwd: work });
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /spec\.metadata\.offsetResetPolicy.*earliest or latest/);
    ok(['mqt', 'delete', '--name', 'keda']);
    ok(['mqt', 'delete', '--name', 'keda-refused']);
  });

  it("talks TLS to a cluster whose certificate the trigger's secret names, with a client certificate where the broker wants one", async () => {
    ok(['fn', 'create', '--name', 'tls', '--env', 'nodejs', '--code', code('tls', 'module.exports = async (c) => ({ status: 200, body: "tls got " + c.request.body.n });')]);
    const ca = path.join(work, 'kafka-ca.pem');
    fs.writeFileSync(ca, kafka.tlsCa!);
    ok(['secret', 'create', '--name', 'kafka-tls', '--from-literal', 'tls=enable', '--from-file', `ca=${ca}`]);
    ok(['mqt', 'create', '--name', 'tls', '--function', 'tls', '--topic', 'tls-in', '--resptopic', 'tls-out', '--secret', 'kafka-tls', '--metadata', `bootstrapServers=${kafka.tlsBrokers!}`]);
    await produce('tls-in', JSON.stringify({ n: 7 }));
    assert.deepEqual(await readUntil('tls-out', 'verify', 1), ['tls got 7']);
    ok(['mqt', 'delete', '--name', 'tls']);
    // A listener that wants a client certificate takes the secret's cert and key.
    const cert = path.join(work, 'client.crt');
    const key = path.join(work, 'client.key');
    fs.writeFileSync(cert, kafka.tlsClient!.cert);
    fs.writeFileSync(key, kafka.tlsClient!.key);
    ok(['secret', 'create', '--name', 'kafka-mtls', '--from-literal', 'tls=enable', '--from-file', `ca=${ca}`, '--from-file', `cert=${cert}`, '--from-file', `key=${key}`]);
    ok(['mqt', 'create', '--name', 'mtls', '--function', 'tls', '--topic', 'mtls-in', '--resptopic', 'mtls-out', '--secret', 'kafka-mtls', '--metadata', `bootstrapServers=${kafka.mtlsBrokers!}`]);
    await produce('mtls-in', JSON.stringify({ n: 8 }));
    assert.deepEqual(await readUntil('mtls-out', 'verify', 1), ['tls got 8']);
    ok(['mqt', 'delete', '--name', 'mtls']);
  });

  it('loses nothing and keeps order across a broker restart and a manager restart', async () => {
    ok(['fn', 'create', '--name', 'ordered', '--env', 'nodejs', '--code', code('ordered', 'module.exports = async (c) => ({ status: 200, body: String(c.request.body.n) });')]);
    ok(['mqt', 'create', '--name', 'ordered', '--function', 'ordered', '--topic', 'ord-in', '--resptopic', 'ord-out']);
    for (let n = 0; n < 10; n++) await produce('ord-in', JSON.stringify({ n }));
    await kafka.restart();
    for (let n = 10; n < 20; n++) await produce('ord-in', JSON.stringify({ n }));
    await server.kill();
    server = await startServer({ dataDir, sets: ['kafka.enabled=true', `kafka.brokers=${kafka.brokers}`] });
    for (let n = 20; n < 30; n++) await produce('ord-in', JSON.stringify({ n }));
    const got: number[] = [];
    const deadline = Date.now() + 120_000;
    while (new Set(got).size < 30 && Date.now() < deadline) {
      const m = await readOne('ord-out', 'verify');
      if (m) got.push(Number(m.value));
    }
    // At-least-once: a message in flight at a restart may come twice, never out of order or missing.
    const firstSeen = got.filter((n, i) => got.indexOf(n) === i);
    assert.deepEqual(firstSeen, Array.from({ length: 30 }, (_, i) => i));
  });
});
