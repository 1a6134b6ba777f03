// The read-back route settles each delivery by what happened to its reply:
// committed once the reply is written, given back when the client left first.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { FlintError } from '../api/errors.ts';
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
/** What the fake broker was given to produce. */
const produced: { topic: string; key?: string | null; value: Buffer; headers?: Record<string, string> }[] = [];
/** How the fake broker answers the next read. */
let next: (signal: AbortSignal | undefined) => Promise<TopicDelivery | undefined>;

before(async () => {
  const access: TopicAccess = {
    read: (_topic, _group, _timeoutMs, signal) => next(signal),
    produce: async (topic, msg) => {
      produced.push({ topic, ...msg });
    },
  };
  app = Fastify();
  // The controller's own handler, in short: a FlintError's status and code.
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    reply.code(err instanceof FlintError ? err.status : (err.statusCode ?? 500)).send({ code: err.code, message: err.message });
  });
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

describe('topic produce route', () => {
  beforeEach(() => {
    produced.length = 0;
  });
  const post = (query: string, body: string | Buffer | undefined, contentType?: string) =>
    fetch(`${base}/topics/t/messages${query}`, { method: 'POST', headers: contentType ? { 'content-type': contentType } : {}, body });

  it("takes Flint's JSON form, and answers 204", async () => {
    const res = await post('', JSON.stringify({ key: 'k', value: 'hi', headers: { a: 'b' } }), 'application/json');
    assert.equal(res.status, 204);
    assert.deepEqual(produced, [{ topic: 't', key: 'k', value: Buffer.from('hi'), headers: { a: 'b' } }]);
    assert.equal((await post('', JSON.stringify({ value: Buffer.from([0, 255]).toString('base64'), encoding: 'base64' }), 'application/json')).status, 204);
    assert.deepEqual(produced[1], { topic: 't', key: null, value: Buffer.from([0, 255]), headers: undefined });
  });

  it("keeps a null key null and an empty key empty (two different keys; `flint topic produce` sends null)", async () => {
    assert.equal((await post('', JSON.stringify({ key: null, value: 'a' }), 'application/json')).status, 204);
    assert.equal((await post('', JSON.stringify({ key: '', value: 'b' }), 'application/json')).status, 204);
    assert.deepEqual(
      produced.map((m) => m.key),
      [null, ''],
    );
  });

  it("takes kafka-pixy's form: the raw body is the message, ?key= its key, and answers 200 {}", async () => {
    const res = await post('?key=bar&sync', 'Good news everyone!', 'text/plain');
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {});
    assert.deepEqual(produced, [{ topic: 't', key: 'bar', value: Buffer.from('Good news everyone!'), headers: undefined }]);
  });

  it("keeps a JSON body whole as the message when a key or sync parameter says kafka-pixy's form", async () => {
    const body = '{"bar":  "bazz"}';
    assert.equal((await post('?key=bar', body, 'application/json')).status, 200);
    assert.equal((await post('?sync', body, 'application/json')).status, 200);
    assert.deepEqual(
      produced.map((m) => [m.key, m.value.toString()]),
      [
        ['bar', body],
        [null, body],
      ],
    );
  });

  it('takes any bytes in any other content type, without a key, and an empty message', async () => {
    const bytes = Buffer.from([0, 1, 2, 254, 255]);
    assert.equal((await post('', bytes, 'application/octet-stream')).status, 200);
    assert.equal((await post('?key=', undefined)).status, 200);
    assert.deepEqual(
      produced.map((m) => [m.key, m.value]),
      [
        [null, bytes],
        ['', Buffer.alloc(0)],
      ],
    );
  });

  it("refuses a JSON body that is not JSON, or not Flint's form, in Flint's form", async () => {
    const bad = await post('', '{"value": ', 'application/json');
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { code: string }).code, 'FLINT_ERR_BAD_JSON');
    assert.equal((await post('', JSON.stringify({ key: 'k' }), 'application/json')).status, 400);
    assert.deepEqual(produced, []);
  });
});
