// Kafka trigger benchmark: messages per second through a trigger to a
// trivial function, as a ratio of a hand-written consumer that posts each
// message straight to an identical worker and publishes the answer, both
// timed until a reader of the answer topic has seen every answer; and the
// end-to-end latency of one message (produce -> function -> response topic).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { startKafka } from '../scripts/kafka-broker.ts';
import { startWorker } from '../src/executor/process/worker-process.ts';
import type { Subscription } from '../src/mqtrigger/connector.ts';
import { KafkaConnector } from '../src/mqtrigger/kafka.ts';
import { startServer } from '../test/helpers/server.ts';
import { fmt, percentiles } from './lib.ts';

const FN = 'module.exports = async (c) => ({ status: 200, body: "ok " + c.request.body.i });';

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A reader of an answer topic that counts what it sees. */
async function countAnswers(conn: KafkaConnector, topic: string): Promise<{ seen: number; sub: Subscription }> {
  await conn.ensureTopic(topic);
  const counter = { seen: 0, sub: undefined as unknown as Subscription };
  counter.sub = await conn.subscribe({ group: `bench-${topic}`, topic, onMessage: async () => void counter.seen++ });
  return counter;
}

export async function kafkaBench(sandbox: 'bubblewrap' | 'none', count: number): Promise<string[][]> {
  const rows: string[][] = [];
  const kafka = await startKafka();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mqbench-'));
  const conn = new KafkaConnector({ brokers: [kafka.brokers], clientId: 'bench' });
  const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error', 'kafka.enabled=true', `kafka.brokers=${kafka.brokers}`] });
  try {
    // Baseline: a consumer of our own posting straight to a worker.
    const worker = await startWorker({ id: 'mq-direct', runtime: 'node', instanceDir: path.join(work, 'direct'), sandbox, allowNetwork: false, memoryMB: 256, onOutput() {} });
    fs.writeFileSync(path.join(worker.hostDirs.userfunc, 'deployarchive'), FN);
    await worker.specialize({ filepath: path.posix.join(worker.sandboxDirs.userfunc, 'deployarchive') }, 10_000);
    const direct = new Pool('http://localhost', { socketPath: worker.socketPath, connections: 1 });
    for (let i = 0; i < count; i++) await conn.publish('base-in', { value: JSON.stringify({ i }) });
    // Both sides are timed the same way: until a reader of the output topic
    // has seen every answer.
    const baseOut = await countAnswers(conn, 'base-out');
    const t0 = performance.now();
    const base = await conn.subscribe({
      group: 'bench-base',
      topic: 'base-in',
      onMessage: async (m) => {
        const r = await direct.request({ path: '/', method: 'POST', headers: { 'content-type': 'application/json' }, body: m.value });
        const body = await r.body.text();
        await conn.publish('base-out', { key: m.key, value: body });
      },
    });
    await until(() => baseOut.seen >= count, 300_000, 'baseline consumer');
    const baseRate = count / ((performance.now() - t0) / 1000);
    await base.close();
    await baseOut.sub.close();
    await direct.close();
    await worker.kill();

    // Through Flint: the same messages, a trigger, the router, the executor.
    const api = async (plural: string, body: unknown) => {
      const res = await fetch(`${server.controllerUrl}/v1/namespaces/default/${plural}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (res.status !== 201) throw new Error(`${plural}: ${res.status} ${await res.text()}`);
    };
    await api('environments', { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 1 } });
    await api('packages', { metadata: { name: 'sink-pkg' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: Buffer.from(FN).toString('base64') } } });
    await api('functions', { metadata: { name: 'sink' }, spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'sink-pkg' } } } });
    await fetch(`${server.routerUrl}/flint-function/sink`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"i":-1}' }).then((r) => r.text());
    for (let i = 0; i < count; i++) await conn.publish('flint-in', { value: JSON.stringify({ i }) });
    const out = await countAnswers(conn, 'flint-out');
    const t1 = performance.now();
    await api('messagequeuetriggers', { metadata: { name: 'bench' }, spec: { functionref: { name: 'sink' }, messageQueueType: 'kafka', topic: 'flint-in', respTopic: 'flint-out' } });
    await until(() => out.seen >= count, 300_000, 'trigger throughput');
    const flintRate = count / ((performance.now() - t1) / 1000);
    rows.push(['Kafka trigger throughput / hand-written consumer', `${fmt(flintRate / baseRate, 2)}x`, `trigger ${fmt(flintRate)} msg/s, direct consumer ${fmt(baseRate)} msg/s (${count} messages)`, '≥ 0.7x']);

    // End-to-end latency, one message at a time.
    const sentAt = new Map<number, number>();
    const lat: number[] = [];
    await out.sub.close();
    const timed = await conn.subscribe({
      group: 'bench-latency',
      topic: 'flint-out',
      from: 'latest',
      onMessage: async (m) => {
        const i = Number(m.value.toString().split(' ')[1]);
        const at = sentAt.get(i);
        if (at !== undefined) lat.push((performance.now() - at) * 1000);
      },
    });
    await new Promise((r) => setTimeout(r, 2000));
    for (let i = 0; i < 100; i++) {
      const id = 1_000_000 + i;
      sentAt.set(id, performance.now());
      await conn.publish('flint-in', { value: JSON.stringify({ i: id }) });
      await until(() => lat.length > i, 30_000, 'latency message');
    }
    await timed.close();
    const p = percentiles(lat);
    rows.push(['Kafka trigger end-to-end latency', `p50 ${fmt(p.p50 / 1000, 1)} ms`, `p99 ${fmt(p.p99 / 1000, 1)} ms (produce -> function -> response topic, 100 messages)`, '']);
  } finally {
    await conn.close();
    await server.stop();
    await kafka.stop();
    fs.rmSync(work, { recursive: true, force: true });
    fs.rmSync(kafka.dataDir, { recursive: true, force: true });
  }
  return rows;
}
