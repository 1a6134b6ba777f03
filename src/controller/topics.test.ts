// The read-back route settles each delivery by what happened to its reply:
// committed once the reply is written, given back when the client left first.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { eventually } from '../testing/eventually.ts';
import { ErrorBody } from './openapi.ts';
import { registerTopicRoutes, type TopicAccess, type TopicDelivery } from './topics.ts';

interface Settled {
  commits: number;
  givenBack: number;
}

function delivery(value: string, settled: Settled): TopicDelivery {
  return {
    message: { key: null, value: Buffer.from(value), partition: 0, offset: '7' },
    commit: () => settled.commits++,
    giveBack: () => settled.givenBack++,
  };
}


let app: FastifyInstance;
let base: string;
const settled: Settled = { commits: 0, givenBack: 0 };
/** How the fake broker answers the next read. */
let next: (signal: AbortSignal | undefined) => Promise<TopicDelivery | undefined>;

before(async () => {
  const access: TopicAccess = {
    read: (_topic, _group, _timeoutMs, signal) => next(signal),
    produce: async () => {},
  };
  app = Fastify();
  // The routes' error responses refer to the shared Error schema, as createController registers it.
  app.addSchema(ErrorBody);
  registerTopicRoutes(app, access);
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
after(async () => {
  await app?.close();
});

describe('topic read-back route', () => {
  beforeEach(() => {
    settled.commits = 0;
    settled.givenBack = 0;
  });

  it('commits a message once its reply is written', async () => {
    next = async () => delivery('hello', settled);
    const res = await fetch(`${base}/topics/t/messages?group=g`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { value: string; offset: number };
    assert.equal(Buffer.from(body.value, 'base64').toString(), 'hello');
    assert.equal(body.offset, 7);
    await eventually(() => settled.commits === 1, 'the commit');
    assert.equal(settled.givenBack, 0);
  });

  it('gives a message back after a HEAD, which carries no body', async () => {
    next = async () => delivery('unseen', settled);
    const res = await fetch(`${base}/topics/t/messages?group=g`, { method: 'HEAD' });
    assert.equal(res.status, 200);
    await eventually(() => settled.givenBack === 1, 'the message given back');
    assert.equal(settled.commits, 0);
  });

  it('gives a message back when its client left before the reply', async () => {
    // The message arrives just as the client goes: the read ignores the abort.
    let reading = false;
    next = async (signal) => {
      reading = true;
      if (signal && !signal.aborted) await once(signal, 'abort');
      return delivery('late', settled);
    };
    const req = http.get(`${base}/topics/t/messages?group=g`);
    req.on('error', () => {});
    await eventually(() => reading, 'the route to read');
    req.destroy();
    await eventually(() => settled.givenBack === 1, 'the message given back');
    assert.equal(settled.commits, 0);
  });
});
