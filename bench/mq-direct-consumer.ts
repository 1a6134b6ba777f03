// The Kafka benchmark's baseline, run as a process of its own as a user's
// hand-written consumer would be: consume `base-in`, POST each message
// straight to a worker's Unix socket, publish the answer to `base-out`.
// `node bench/mq-direct-consumer.ts <brokers> <worker socket>`; stops on SIGTERM.
import { Pool } from 'undici';
import { KafkaConnector } from '../src/mqtrigger/kafka.ts';

const [brokers, socketPath] = process.argv.slice(2);
if (!brokers || !socketPath) {
  process.stderr.write('usage: mq-direct-consumer.ts <brokers> <worker socket>\n');
  process.exit(2);
}
const conn = new KafkaConnector({ brokers: [brokers], clientId: 'bench-direct' });
const worker = new Pool('http://localhost', { socketPath, connections: 1 });
const sub = await conn.subscribe({
  group: 'bench-base',
  topic: 'base-in',
  onMessage: async (m) => {
    const r = await worker.request({ path: '/', method: 'POST', headers: { 'content-type': 'application/json' }, body: m.value });
    const body = await r.body.text();
    await conn.publish('base-out', { key: m.key, value: body });
  },
});
process.stdout.write('consuming\n');
process.once('SIGTERM', async () => {
  await sub.close();
  await worker.close();
  await conn.close();
  process.exit(0);
});
