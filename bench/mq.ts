// Kafka trigger benchmark: messages per second through a trigger to a
// trivial function, as a ratio of a hand-written consumer (a process of its
// own, bench/mq-direct-consumer.ts) that posts each message straight to an
// identical worker and publishes the answer, both timed by a reader of the
// answer topic from the first answer to the last; and the
// end-to-end latency of one message (produce -> function -> response topic).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startKafka } from '../scripts/kafka-broker.ts';
import { startWorker } from '../src/executor/process/worker-process.ts';
import type { Subscription } from '../src/mqtrigger/connector.ts';
import { KafkaConnector } from '../src/mqtrigger/kafka.ts';
import { eventually } from '../src/testing/eventually.ts';
import { startServer } from '../test/helpers/server.ts';
import { fmt, percentiles } from './lib.ts';

const FN = 'module.exports = async (c) => ({ status: 200, body: "ok " + c.request.body.i });';


interface AnswerCounter {
  seen: number;
  firstAt: number;
  lastAt: number;
  sub: Subscription;
}

/** A reader of an answer topic that counts what it sees, and when. */
async function countAnswers(conn: KafkaConnector, topic: string): Promise<AnswerCounter> {
  await conn.ensureTopic(topic);
  const counter: AnswerCounter = { seen: 0, firstAt: 0, lastAt: 0, sub: undefined as unknown as Subscription };
  counter.sub = await conn.subscribe({
    group: `bench-${topic}`,
    topic,
    onMessage: async () => {
      counter.lastAt = performance.now();
      if (counter.seen++ === 0) counter.firstAt = counter.lastAt;
    },
  });
  return counter;
}

/**
 * Answers per second from the first answer to the last: the steady rate,
 * without the consumer's start and its group join, which differ between the
 * two sides.
 */
const rateOf = (c: AnswerCounter) => (c.seen - 1) / ((c.lastAt - c.firstAt) / 1000);

export async function kafkaBench(sandbox: 'bubblewrap' | 'none', count: number): Promise<string[][]> {
  const rows: string[][] = [];
  const kafka = await startKafka();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-mqbench-'));
  const conn = new KafkaConnector({ brokers: [kafka.brokers], clientId: 'bench' });
  const server = await startServer({ sets: [`executor.sandbox=${sandbox}`, 'logLevel=error', 'kafka.enabled=true', `kafka.brokers=${kafka.brokers}`] });
  try {
    // Baseline: a hand-written consumer, in a process of its own, posting straight to a worker.
    const worker = await startWorker({ id: 'mq-direct', runtime: 'node', instanceDir: path.join(work, 'direct'), sandbox, allowNetwork: false, memoryMB: 256, onOutput() {} });
    fs.writeFileSync(path.join(worker.hostDirs.userfunc, 'deployarchive'), FN);
    await worker.specialize({ filepath: path.posix.join(worker.sandboxDirs.userfunc, 'deployarchive') }, 10_000);
    for (let i = 0; i < count; i++) await conn.publish('base-in', { value: JSON.stringify({ i }) });
    // Both sides are timed the same way, by a reader of the answer topic in
    // the benchmark's process.
    const baseOut = await countAnswers(conn, 'base-out');
    const base = spawn(process.execPath, [path.join(import.meta.dirname, 'mq-direct-consumer.ts'), kafka.brokers, worker.socketPath], { stdio: ['ignore', 'ignore', 'inherit'] });
    try {
      await eventually(() => baseOut.seen >= count, 'baseline consumer', 300_000);
    } finally {
      base.kill('SIGTERM');
      await once(base, 'exit');
    }
    const baseRate = rateOf(baseOut);
    await baseOut.sub.close();
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
    await api('messagequeuetriggers', { metadata: { name: 'bench' }, spec: { functionref: { name: 'sink' }, messageQueueType: 'kafka', topic: 'flint-in', respTopic: 'flint-out' } });
    await eventually(() => out.seen >= count, 'trigger throughput', 300_000);
    const flintRate = rateOf(out);
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
      await eventually(() => lat.length > i, 'latency message', 30_000);
    }
    await timed.close();
    const p = percentiles(lat);
    rows.push(['Kafka trigger end-to-end latency', `p50 ${fmt(p.p50 / 1000, 1)} ms`, `p99 ${fmt(p.p99 / 1000, 1)} ms (produce -> function -> response topic, 100 messages)`, '']);
  } finally {
    await conn.close();
    await server.stop();
    await kafka.destroy();
    fs.rmSync(work, { recursive: true, force: true });
  }
  return rows;
}
