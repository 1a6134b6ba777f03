// Which broker a message-queue trigger consumes from, and what to set when
// the install has none of its type: the trigger manager says it in the
// trigger's status, and the CLI warns with it when such a trigger is created.
// Free of the schema library, like names.ts: the CLI reads it.
import { kafkaTriggerSettings } from './kafka-trigger.ts';
import type { MQ_TYPES } from './names.ts';

type MessageQueueType = (typeof MQ_TYPES)[number];

/** The install values that give a broker type its broker, and the trigger metadata that names a server of its own instead. */
export const BROKER_INSTALL_HINT: Readonly<Record<MessageQueueType, string>> = {
  kafka: "set kafka.enabled=true and kafka.brokers, or the trigger's metadata bootstrapServers",
  'nats-jetstream': "set nats.enabled=true and nats.servers, or the trigger's metadata natsServer",
  rabbitmq: "set rabbitmq.enabled=true and rabbitmq.url, or the trigger's metadata host",
  redis: "set redis.enabled=true and redis.url, or the trigger's metadata address",
};

/** Why a trigger of this type has no broker, when the install configures none and it names none of its own. */
export function noBrokerReason(type: MessageQueueType): string {
  return `no ${type === 'kafka' ? 'Kafka' : type} broker: ${BROKER_INSTALL_HINT[type]}`;
}

/**
 * Whether a trigger consumes from the install's broker of its type, rather
 * than from a server its metadata (or, for RabbitMQ, its secret's `host`) names.
 */
export function usesInstallBroker(spec: { messageQueueType: MessageQueueType; metadata?: Record<string, string> }, secret?: Record<string, string>): boolean {
  const m = spec.metadata;
  switch (spec.messageQueueType) {
    case 'kafka':
      return kafkaTriggerSettings(m).brokers === undefined;
    case 'nats-jetstream':
      return m?.natsServer === undefined;
    case 'rabbitmq':
      return (secret?.host ?? m?.host) === undefined;
    case 'redis':
      return m?.address === undefined && m?.host === undefined;
  }
}
