import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { natsMetadataProblem, natsSettings } from './nats-trigger.ts';

describe('NATS JetStream trigger metadata', () => {
  it("accepts Fission's connector keys and KEDA's scaler keys, and names the key of what it refuses", () => {
    const ok = { natsServer: 'nats://nats.example:4222, tls://u:p@other:4443,  third', consumer: 'orders-worker', stream: 'ORDERS', natsServerMonitoringEndpoint: 'nats.example:8222', account: '$G', lagThreshold: '10' };
    assert.equal(natsMetadataProblem(ok), undefined);
    assert.equal(natsMetadataProblem(undefined), undefined);
    const cases: Array<[Record<string, string>, string, RegExp]> = [
      [{ natsServer: 'http://nats.example:8222' }, 'natsServer', /host:port or a nats:\/\/ or tls:\/\/ URL \(the client port, not KEDA's natsServerMonitoringEndpoint\)/],
      [{ natsServer: ' , ' }, 'natsServer', /names no server/],
      [{ natsServer: 'a:4222,b:99999' }, 'natsServer', /'b:99999' is not host:port/],
      [{ natsServer: 'has space:4222' }, 'natsServer', /is not host:port/],
      [{ consumer: 'a.b' }, 'consumer', /'a.b' is not a JetStream name/],
      [{ consumer: '' }, 'consumer', /not a JetStream name/],
      [{ stream: 'ORDERS>' }, 'stream', /not a JetStream name/],
    ];
    for (const [metadata, key, message] of cases) {
      const p = natsMetadataProblem(metadata);
      assert.equal(p?.field, `spec.metadata.${key}`, JSON.stringify(metadata));
      assert.match(p?.message ?? '', message);
    }
  });

  it('hides the credentials of a refused server URL', () => {
    const message = natsMetadataProblem({ natsServer: 'ws://alice:secret@h:80' })?.message ?? '';
    assert.match(message, /\*\*\*@h:80/);
    assert.doesNotMatch(message, /secret/);
  });

  it("takes the servers from natsServer, the consumer from consumer, and credentials from the secret", () => {
    assert.deepEqual(natsSettings(undefined, undefined), {});
    assert.deepEqual(natsSettings({ consumer: 'c' }, { username: 'u', password: 'p' }), { group: 'c' }, "credentials go only with the trigger's own servers");
    assert.deepEqual(natsSettings({ natsServer: 'a:1,b:2' }, undefined), { servers: ['a:1', 'b:2'] });
    assert.deepEqual(natsSettings({ natsServer: 'a:1', consumer: 'c' }, { username: 'u', password: 'p' }), { servers: ['a:1'], auth: { user: 'u', pass: 'p' }, group: 'c' });
    assert.deepEqual(natsSettings({ natsServer: 'a:1' }, { token: 't' }), { servers: ['a:1'], auth: { token: 't' } });
    assert.deepEqual(natsSettings({ natsServer: 'a:1' }, { tls: 'enable', ca: 'CA', cert: 'C', key: 'K', token: 't' }), { servers: ['a:1'], auth: { token: 't' }, tls: { ca: 'CA', cert: 'C', key: 'K' } });
    assert.deepEqual(natsSettings({ natsServer: 'a:1' }, { ca: 'CA' }), { servers: ['a:1'] }, 'without tls=enable the PEM texts are not read');
    assert.equal(natsSettings({ natsServer: 'a:1' }, { tls: 'enable', key: 'K' }), "'cert' and 'key' go together");
    assert.equal(natsSettings({ natsServer: 'a:1' }, { username: 'u' }), "'username' and 'password' go together");
    assert.equal(natsSettings({ natsServer: 'a:1' }, { token: 't', username: 'u', password: 'p' }), "either 'token' or 'username' and 'password', not both");
  });
});
