import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rabbitMetadataProblem, rabbitSettings, redisMetadataProblem, redisSettings } from './queue-trigger.ts';

describe('RabbitMQ and Redis trigger metadata', () => {
  it('accepts what KEDA accepts and names the key of what it refuses', () => {
    assert.equal(rabbitMetadataProblem({ host: 'amqp://u:p@h:5672/v', queueName: 't', mode: 'QueueLength', value: '5' }, 't'), undefined);
    assert.equal(redisMetadataProblem({ address: 'h:6379', stream: 't', consumerGroup: 'g', pendingEntriesCount: '10', databaseIndex: '1', enableTLS: 'false' }, 't'), undefined);
    const cases: Array<[ReturnType<typeof rabbitMetadataProblem>, string, RegExp]> = [
      [rabbitMetadataProblem({ host: 'http://h:15672' }, 't'), 'host', /amqp:\/\/ or amqps:\/\/ URL, got http:/],
      [rabbitMetadataProblem({ host: 'not a url' }, 't'), 'host', /is not a URL/],
      [rabbitMetadataProblem({ queueName: 'u' }, 't'), 'queueName', /'u' differs from spec.topic 't'/],
      [redisMetadataProblem({ address: 'h' }, 't'), 'address', /'h' is not host:port/],
      [redisMetadataProblem({ host: 'h', port: 'x' }, 't'), 'host', /not host:port/],
      [redisMetadataProblem({ databaseIndex: 'one' }, 't'), 'databaseIndex', /whole number/],
      [redisMetadataProblem({ enableTLS: 'yes' }, 't'), 'enableTLS', /true or false/],
      [redisMetadataProblem({ consumerGroup: '' }, 't'), 'consumerGroup', /visible ASCII/],
      [redisMetadataProblem({ stream: 'u' }, 't'), 'stream', /differs from spec.topic/],
    ];
    for (const [p, key, message] of cases) {
      assert.equal(p?.field, `spec.metadata.${key}`);
      assert.match(p?.message ?? '', message);
    }
  });

  it('hides the credentials of a bad URL in its message', () => {
    for (const host of ['amqp//user:secret@h', 'amqp://user:se/cret@h:x', 'user:secret@h']) {
      const message = rabbitMetadataProblem({ host }, 't')?.message ?? '';
      assert.notEqual(message, '', host);
      assert.doesNotMatch(message, /secret|se\/cret/, host);
    }
  });

  it('builds the server URL from the metadata and the secret', () => {
    assert.deepEqual(rabbitSettings(undefined, undefined), {});
    assert.deepEqual(rabbitSettings({ host: 'amqp://h/' }, { host: 'amqp://from-secret/', username: 'a', password: 'b c' }), { url: 'amqp://a:b%20c@from-secret/' });
    assert.match(rabbitSettings(undefined, { host: 'redis://h' }) as string, /^'host' must be an amqp:\/\//);
    assert.deepEqual(redisSettings({ consumerGroup: 'g' }, undefined), { group: 'g' });
    assert.deepEqual(redisSettings({ host: 'h' }, { username: 'u', password: 'p' }), { url: 'redis://u:p@h:6379', group: undefined });
  });

  it("takes TLS material from the secret with KEDA's names, for the trigger's own server", () => {
    const pem = { tls: 'enable', ca: 'CA', cert: 'CERT', key: 'KEY' };
    assert.deepEqual(rabbitSettings({ host: 'amqps://h:5671/' }, pem), { url: 'amqps://h:5671/', tls: { ca: 'CA', cert: 'CERT', key: 'KEY' } });
    assert.deepEqual(rabbitSettings({ host: 'amqps://h/' }, { tls: 'enable' }), { url: 'amqps://h/', tls: {} });
    // Without tls=enable the PEM texts are not used (as KEDA): amqps:// then trusts the system's CAs.
    assert.deepEqual(rabbitSettings({ host: 'amqps://h/' }, { ca: 'CA' }), { url: 'amqps://h/' });
    assert.equal(rabbitSettings({ host: 'amqp://h/' }, pem), "'tls' enable needs an amqps:// host");
    assert.equal(rabbitSettings({ host: 'amqps://h/' }, { tls: 'on' }), "'tls' must be enable or disable, got 'on'");
    assert.equal(rabbitSettings({ host: 'amqps://h/' }, { tls: 'enable', cert: 'C' }), "'cert' and 'key' go together");
    assert.deepEqual(redisSettings({ address: 'h:6380' }, pem), { url: 'rediss://h:6380', group: undefined, tls: { ca: 'CA', cert: 'CERT', key: 'KEY' } });
    assert.deepEqual(redisSettings({ address: 'h:6380', enableTLS: 'true' }, undefined), { url: 'rediss://h:6380', group: undefined });
    assert.deepEqual(redisSettings({ address: 'h:6380', enableTLS: 'true' }, { ca: 'CA' }), { url: 'rediss://h:6380', group: undefined, tls: { ca: 'CA' } });
    assert.deepEqual(redisSettings({ address: 'h:6380' }, { ca: 'CA' }), { url: 'redis://h:6380', group: undefined });
    assert.equal(redisSettings({ address: 'h:6380' }, { tls: 'enable', key: 'K' }), "'cert' and 'key' go together");
  });
});
