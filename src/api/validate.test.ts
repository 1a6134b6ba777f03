import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { builderForImage, runtimeForImage } from './images.ts';
import { validateResource } from './validate.ts';

const fail = (kind: Parameters<typeof validateResource>[0], obj: unknown, field: string, message: RegExp, opts = { localImages: true }) =>
  assert.throws(() => validateResource(kind, obj, opts), (err: any) => {
    assert.equal(err.code, 'FLINT_ERR_VALIDATION');
    assert.equal(err.field, field);
    assert.match(err.message, message);
    return true;
  });

describe('validation', () => {
  it('applies defaults and fills kind, apiVersion and namespace', () => {
    const fn = validateResource('Function', {
      metadata: { name: 'f' },
      spec: { environment: { name: 'e' }, package: { packageref: { name: 'p' } } },
    }) as any;
    assert.equal(fn.kind, 'Function');
    assert.equal(fn.apiVersion, 'flint.dev/v1');
    assert.equal(fn.metadata.namespace, 'default');
    assert.equal(fn.spec.functionTimeout, 60);
    assert.equal(fn.spec.idletimeout, 120);
    assert.equal(fn.spec.requestsPerPod, 1);
    assert.equal(fn.spec.concurrency, 500);
  });

  it('accepts Fission spec files by apiVersion', () => {
    const env = validateResource('Environment', { apiVersion: 'fission.io/v1', kind: 'Environment', metadata: { name: 'n' }, spec: { runtime: { image: 'ghcr.io/fission/node-env:latest' } } }, { localImages: true });
    assert.equal(env.apiVersion, 'flint.dev/v1');
  });

  it('names the field of every refusal', () => {
    fail('Environment', { metadata: { name: '-x' }, spec: { runtime: { image: 'flint/node-env' } } }, 'metadata.name', /not a valid name/);
    fail('Environment', { metadata: { name: 'x' }, spec: { runtime: { image: 'flint/node-env' }, version: 4 } }, 'spec.version', /less or equal to 3/);
    fail('Environment', { metadata: { name: 'x' }, spec: { runtime: { image: 'java-env' } } }, 'spec.runtime.image', /flint\/node-env/);
    fail('Environment', { metadata: { name: 'x' }, spec: { runtime: { image: 'flint/node-env' }, builder: { image: 'x' } } }, 'spec.builder.image', /unknown builder/);
    fail('HTTPTrigger', { metadata: { name: 'r' }, spec: { functionref: { name: 'f' } } }, 'spec.relativeurl', /either prefix or relativeurl/);
    fail('HTTPTrigger', { metadata: { name: 'r' }, spec: { relativeurl: '/a', host: 'bad host', functionref: { name: 'f' } } }, 'spec.host', /not a valid host/);
    fail('HTTPTrigger', { metadata: { name: 'r' }, spec: { relativeurl: '/a', functionref: { type: 'function-weights', functionweights: { a: 50, b: 40 } } } }, 'spec.functionref.functionweights', /add up to 100/);
    fail('HTTPTrigger', { metadata: { name: 'r' }, spec: { relativeurl: '/a', functionref: { name: 'f' }, ingressconfig: { path: 'x' } } }, 'spec.ingressconfig.path', /absolute/);
    fail('HTTPTrigger', { metadata: { name: 'r' }, spec: { relativeurl: '/a', functionref: { name: 'f' }, ingressconfig: { host: 'a b' } } }, 'spec.ingressconfig.host', /DNS name/);
    fail('MessageQueueTrigger', { metadata: { name: 'q' }, spec: { functionref: { name: 'f' }, messageQueueType: 'kafka', topic: 'a', errorTopic: 'a' } }, 'spec.errorTopic', /differ/);
    fail('MessageQueueTrigger', { metadata: { name: 'q' }, spec: { functionref: { type: 'function-weights', functionweights: { a: 50, b: 50 } }, messageQueueType: 'kafka', topic: 'a' } }, 'spec.functionref.type', /calls one function/);
    const mqtWith = (metadata: Record<string, string>) => ({ metadata: { name: 'q' }, spec: { functionref: { name: 'f' }, messageQueueType: 'kafka', topic: 'in', metadata } });
    fail('MessageQueueTrigger', mqtWith({ bootstrapServers: 'kafka:9092,nohost' }), 'spec.metadata.bootstrapServers', /'nohost' is not host:port/);
    fail('MessageQueueTrigger', mqtWith({ offsetResetPolicy: 'newest' }), 'spec.metadata.offsetResetPolicy', /earliest or latest/);
    fail('MessageQueueTrigger', mqtWith({ topic: 'other' }), 'spec.metadata.topic', /differs from spec.topic 'in'/);
    const mqtSpec = (extra: Record<string, unknown>) => ({ metadata: { name: 'q' }, spec: { functionref: { name: 'f' }, messageQueueType: 'redis', topic: 'in', ...extra } });
    fail('MessageQueueTrigger', mqtSpec({ metadata: { address: 'nohost' } }), 'spec.metadata.address', /not host:port/);
    fail('MessageQueueTrigger', { metadata: { name: 'q' }, spec: { functionref: { name: 'f' }, messageQueueType: 'rabbitmq', topic: 'in', metadata: { host: 'http://mq:15672' } } }, 'spec.metadata.host', /amqp:\/\//);
    fail('MessageQueueTrigger', mqtSpec({ mqtkind: 'fission' }), 'spec.mqtkind', /takes only kafka, not redis/);
    fail('MessageQueueTrigger', mqtSpec({ messageQueueType: 'nats-jetstream', metadata: { natsServer: 'http://nats:8222' } }), 'spec.metadata.natsServer', /not KEDA's natsServerMonitoringEndpoint/);
    fail('MessageQueueTrigger', mqtSpec({ mqtkind: 'classic' }), 'spec.mqtkind', /./);
    fail('MessageQueueTrigger', mqtSpec({ minReplicaCount: 5, maxReplicaCount: 2 }), 'spec.minReplicaCount', /5 is more than maxReplicaCount 2/);
    fail('MessageQueueTrigger', mqtSpec({ pollingInterval: 0 }), 'spec.pollingInterval', /greater or equal to 1/);
    fail('Package', { metadata: { name: 'p' }, spec: { environment: { name: 'e' }, source: { type: 'url' } } }, 'spec.source.url', /required/);
    const fnWith = (streaming: unknown) => ({ metadata: { name: 'f' }, spec: { environment: { name: 'e' }, package: { packageref: { name: 'p' } }, streaming } });
    fail('Function', fnWith({ protocol: 'grpc' }), 'spec.streaming.protocol', /auto|sse|websocket/);
    fail('Function', fnWith({ idleTimeoutSeconds: 0 }), 'spec.streaming.idleTimeoutSeconds', /greater or equal to 1/);
    fail('Function', fnWith({ maxDuration: 5 }), 'spec.streaming.maxDuration', /./);
    assert.equal((validateResource('Function', fnWith({ idleTimeoutSeconds: 5 })) as any).spec.streaming.protocol, 'auto', 'protocol defaults to auto');
    assert.throws(() => validateResource('Secret', 'text'), { code: 'FLINT_ERR_VALIDATION' });
    fail('Secret', { metadata: { name: 's' }, data: { '..': 'x' } }, 'data...', /may not be '\.' or '\.\.'/);
    fail('ConfigMap', { metadata: { name: 'c' }, data: { '.': 'x' } }, 'data..', /may not be '\.' or '\.\.'/);
  });

  it('maps Fission and Flint images to built-in runtimes', () => {
    assert.equal(runtimeForImage('flint/node-env'), 'node');
    assert.equal(runtimeForImage('ghcr.io/fission/node-env:latest'), 'node');
    assert.equal(runtimeForImage('fission/go-env-1.23'), 'go');
    assert.equal(runtimeForImage('registry:5000/x/python-env@sha256:abc'), 'python');
    assert.equal(runtimeForImage('ruby-env'), undefined);
    assert.equal(builderForImage('fission/go-builder-1.23'), 'go');
  });
});
