import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { kafkaAuthFromSecret, kafkaMetadataProblem, kafkaTriggerSettings } from './kafka-trigger.ts';

describe('Kafka trigger metadata and secret', () => {
  it('reads the cluster, group and starting point, with defaults for what is absent', () => {
    assert.deepEqual(kafkaTriggerSettings(undefined), { brokers: undefined, group: undefined, from: 'earliest' });
    assert.deepEqual(kafkaTriggerSettings({ bootstrapServers: 'a.example:9092, [::1]:9093,10.0.0.1:9094', consumerGroup: 'orders', offsetResetPolicy: 'latest', lagThreshold: '50' }), {
      brokers: ['a.example:9092', '[::1]:9093', '10.0.0.1:9094'],
      group: 'orders',
      from: 'latest',
    });
  });

  it('accepts what KEDA accepts and names the key of what it refuses', () => {
    assert.equal(kafkaMetadataProblem(undefined, 't'), undefined);
    assert.equal(kafkaMetadataProblem({ bootstrapServers: 'k:9092', topic: 't', lagThreshold: 'x', allowIdleConsumers: 'true' }, 't'), undefined);
    const cases: Array<[Record<string, string>, string, RegExp]> = [
      [{ bootstrapServers: '' }, 'bootstrapServers', /names no broker/],
      [{ bootstrapServers: 'k:0' }, 'bootstrapServers', /'k:0' is not host:port/],
      [{ bootstrapServers: 'k:70000' }, 'bootstrapServers', /not host:port/],
      [{ bootstrapServers: 'http://k:9092' }, 'bootstrapServers', /not host:port/],
      [{ consumerGroup: '' }, 'consumerGroup', /1 to 255 visible ASCII/],
      [{ consumerGroup: 'a b' }, 'consumerGroup', /visible ASCII/],
      [{ offsetResetPolicy: 'none' }, 'offsetResetPolicy', /earliest or latest, got 'none'/],
      [{ topic: 'u' }, 'topic', /'u' differs from spec.topic 't'/],
    ];
    for (const [metadata, key, message] of cases) {
      const p = kafkaMetadataProblem(metadata, 't');
      assert.equal(p?.field, `spec.metadata.${key}`, JSON.stringify(metadata));
      assert.match(p.message, message);
    }
  });

  it("reads SASL and TLS from a secret with KEDA's parameter names", () => {
    assert.deepEqual(kafkaAuthFromSecret({}), {});
    assert.deepEqual(kafkaAuthFromSecret({ sasl: 'plaintext', username: 'u', password: 'p' }), { sasl: { mechanism: 'PLAIN', username: 'u', password: 'p' } });
    assert.deepEqual(kafkaAuthFromSecret({ sasl: 'SCRAM_SHA512', username: 'u', password: 'p', tls: 'enable', ca: 'CA' }), {
      sasl: { mechanism: 'SCRAM-SHA-512', username: 'u', password: 'p' },
      tls: { ca: 'CA' },
    });
    assert.match(kafkaAuthFromSecret({ sasl: 'gssapi' }) as string, /'sasl' must be none, plaintext, scram_sha256 or scram_sha512, got 'gssapi'/);
    assert.match(kafkaAuthFromSecret({ sasl: 'plaintext', username: 'u' }) as string, /needs 'username' and 'password'/);
    assert.match(kafkaAuthFromSecret({ tls: 'yes' }) as string, /'tls' must be enable or disable/);
    assert.match(kafkaAuthFromSecret({ tls: 'enable', cert: 'C' }) as string, /'cert' and 'key' go together/);
  });
});
