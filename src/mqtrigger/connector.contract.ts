// The shared contract every broker connector must pass; each connector's
// test file runs it against a real broker.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { eventually } from '../testing/eventually.ts';
import type { Connector, QueueMessage } from './connector.ts';

/** Brokers may take a while to rebalance a group or redeliver. */
const BROKER_WAIT_MS = 30_000;
const unique = (p: string) => `${p}-${randomBytes(4).toString('hex')}`;


export interface ContractOptions {
  /** Log-like brokers give every group its own copy; queues share messages among consumers. */
  independentGroups?: boolean;
}

export function runConnectorContract(name: string, open: () => Promise<Connector>, opts: ContractOptions = {}): void {
  const independentGroups = opts.independentGroups ?? true;
  describe(`Connector contract: ${name}`, { timeout: 120_000 }, () => {
    it('delivers published messages in order with key, value and headers', async () => {
      const c = await open();
      try {
        const topic = unique('order');
        await c.ensureTopic(topic);
        for (let i = 0; i < 5; i++) await c.publish(topic, { key: `k${i}`, value: `v${i}`, headers: { n: String(i) } });
        const got: QueueMessage[] = [];
        const sub = await c.subscribe({ group: unique('g'), topic, onMessage: async (m) => void got.push(m) });
        await eventually(() => got.length >= 5, 'five messages', BROKER_WAIT_MS);
        await sub.close();
        assert.deepEqual(got.map((m) => [m.key?.toString(), m.value.toString(), m.headers.n]), [0, 1, 2, 3, 4].map((i) => [`k${i}`, `v${i}`, String(i)]));
      } finally {
        await c.close();
      }
    });

    it('commits only handled messages: a failed handler gets the message again', async () => {
      const c = await open();
      try {
        const topic = unique('redo');
        const group = unique('g');
        await c.ensureTopic(topic);
        await c.publish(topic, { value: 'a' });
        await c.publish(topic, { value: 'b' });
        const first: string[] = [];
        const sub1 = await c.subscribe({
          group,
          topic,
          onMessage: async (m) => {
            first.push(m.value.toString());
            if (m.value.toString() === 'b') throw new Error('handler failed');
          },
        });
        await sub1.done.catch(() => {});
        await sub1.close();
        assert.deepEqual(first, ['a', 'b']);
        const second: string[] = [];
        const sub2 = await c.subscribe({ group, topic, onMessage: async (m) => void second.push(m.value.toString()) });
        await eventually(() => second.length >= 1, 'the redelivered message', BROKER_WAIT_MS);
        await sub2.close();
        assert.deepEqual(second, ['b'], "'a' was committed, 'b' was not");
      } finally {
        await c.close();
      }
    });

    it('commits a message only once its background work settled, and stops at the first that fails', async () => {
      const c = await open();
      try {
        const topic = unique('settle');
        const group = unique('g');
        await c.ensureTopic(topic);
        for (const v of ['a', 'b', 'c']) await c.publish(topic, { value: v });
        const first: string[] = [];
        const sub1 = await c.subscribe({
          group,
          topic,
          onMessage: async (m) => {
            const v = m.value.toString();
            first.push(v);
            const settled = new Promise<void>((resolve, reject) =>
              setTimeout(() => (v === 'b' ? reject(new Error('publishing failed')) : resolve()), 100),
            );
            return { settled };
          },
        });
        await sub1.done.catch(() => {});
        await sub1.close();
        assert.deepEqual(first.slice(0, 2), ['a', 'b']);
        const second: string[] = [];
        const sub2 = await c.subscribe({ group, topic, onMessage: async (m) => void second.push(m.value.toString()) });
        await eventually(() => second.length >= 2, "the messages from 'b' on", BROKER_WAIT_MS);
        await sub2.close();
        assert.deepEqual(second, ['b', 'c'], "'a' settled and was committed; 'b' failed, so neither it nor 'c' was");
      } finally {
        await c.close();
      }
    });

    it('gives each group every message, and a group resumes where it left off', { skip: independentGroups ? false : `${name} is a queue: consumers share its messages` }, async () => {
      const c = await open();
      try {
        const topic = unique('groups');
        await c.ensureTopic(topic);
        await c.publish(topic, { value: 'x' });
        const g1: string[] = [];
        const g2: string[] = [];
        const group1 = unique('g');
        const s1 = await c.subscribe({ group: group1, topic, onMessage: async (m) => void g1.push(m.value.toString()) });
        const s2 = await c.subscribe({ group: unique('g'), topic, onMessage: async (m) => void g2.push(m.value.toString()) });
        await eventually(() => g1.length >= 1 && g2.length >= 1, 'both groups', BROKER_WAIT_MS);
        await s1.close();
        await s2.close();
        await c.publish(topic, { value: 'y' });
        const again: string[] = [];
        const s3 = await c.subscribe({ group: group1, topic, onMessage: async (m) => void again.push(m.value.toString()) });
        await eventually(() => again.length >= 1, 'the resumed group', BROKER_WAIT_MS);
        await s3.close();
        assert.deepEqual(again, ['y']);
      } finally {
        await c.close();
      }
    });
  });
}
