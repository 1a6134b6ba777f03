// `npm run kafka`: a local Kafka broker for trying message-queue triggers.
import { startKafka } from './kafka-broker.ts';

const port = process.env.KAFKA_PORT ? Number(process.env.KAFKA_PORT) : 9092;
const broker = await startKafka({ port });
console.log(`kafka listening on ${broker.brokers} (data in ${broker.dataDir}, removed when this stops)`);
console.log(`start flint with: npx flint server --set kafka.enabled=true --set kafka.brokers=${broker.brokers}`);
const shutdown = async () => {
  await broker.destroy();
  process.exit(0);
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
