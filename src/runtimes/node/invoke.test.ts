// Requests to a specialized worker: what the handler sees and how its answers,
// failures and streams reach the client. One real worker process per suite.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type RunningRuntime, startRuntime } from './testing.ts';
import { eventually } from '../../testing/eventually.ts';

const HANDLER = `
let calls = 0;
module.exports = async (context) => {
  const { request: req, response: res } = context;
  if (req.path !== '/calls') calls++;
  switch (req.path) {
    case '/calls': return { body: { calls } };
    case '/echo': return { status: 201, headers: { 'x-echo': 'yes' }, body: {
      method: req.method, url: req.url, path: req.path, query: req.query, header: req.get('X-Test'),
      type: req.body === undefined ? 'undefined' : Buffer.isBuffer(req.body) ? 'buffer' : typeof req.body,
      body: Buffer.isBuffer(req.body) ? req.body.toString('hex') : req.body, raw: req.rawBody.length } };
    case '/text': return { body: 'plain text' };
    case '/binary': return { body: Buffer.from([0, 1, 2, 255]) };
    case '/typed': return { headers: { 'content-type': 'text/html' }, body: '<b>hi</b>' };
    case '/nobody': return { status: 204 };
    case '/throw': throw new Error('boom-thrown');
    case '/reject': return Promise.reject(new TypeError('boom-rejected'));
    case '/undefined': return undefined;
    case '/badstatus': return { status: 'teapot', body: 'x' };
    case '/stream':
      res.writeHead(200, { 'content-type': 'text/plain' });
      for (let i = 0; i < 5; i++) { res.write('chunk' + i + ';'); await new Promise((r) => setImmediate(r)); }
      res.end('done');
      return { status: 500, body: 'ignored' };
    case '/stream-then-throw':
      res.writeHead(200);
      res.write('partial');
      throw new Error('boom-mid-stream');
    case '/readable': return { body: require('node:stream').Readable.from(['a', 'b', 'c']) };
    case '/log': context.log.log('log-line-to-stdout'); context.log.error('log-line-to-stderr'); return { body: 'logged' };
    case '/healthz': return { body: 'the function own healthz' };
    case '/slow-upload': return { body: { size: req.rawBody.length } };
    case '/crash': setImmediate(() => process.exit(7)); return new Promise(() => {});
    default: return { body: 'default ' + req.method + ' ' + req.url };
  }
};`;

let rt: RunningRuntime;

before(async () => {
  rt = await startRuntime({ FLINT_MAX_BODY_BYTES: String(64 * 1024) });
  const dir = rt.write({ deployarchive: HANDLER });
  const s = await rt.specialize({ filepath: path.join(dir, 'deployarchive') });
  assert.equal(s.status, 200, s.text);
});
after(() => rt?.stop());

const post = (p: string, body: string | Buffer, type?: string) =>
  rt.request(p, { method: 'POST', body, headers: type ? { 'content-type': type } : {} });

describe('node runtime: requests', () => {
  it('gives the handler method, url, path, query and headers', async () => {
    const r = await rt.request('/echo?a=1&b=x&b=y&__proto__=z', { headers: { 'x-test': 'hdr' } });
    assert.equal(r.status, 201);
    assert.equal(r.headers['x-echo'], 'yes');
    assert.match(String(r.headers['content-type']), /^application\/json/);
    assert.equal(r.json.method, 'GET');
    assert.equal(r.json.url, '/echo?a=1&b=x&b=y&__proto__=z');
    assert.equal(r.json.path, '/echo');
    assert.deepEqual(r.json.query, { a: '1', b: ['x', 'y'], ['__proto__']: 'z' });
    assert.equal(r.json.header, 'hdr');
    assert.equal(r.json.type, 'undefined');
    assert.equal(r.json.raw, 0);
  });

  it('parses JSON, text, urlencoded and binary bodies', async () => {
    const j = await post('/echo', JSON.stringify({ x: [1, 2] }), 'application/json; charset=utf-8');
    assert.deepEqual(j.json.body, { x: [1, 2] });
    assert.equal(j.json.type, 'object');
    const vendor = await post('/echo', '"s"', 'application/vnd.api+json');
    assert.equal(vendor.json.body, 's');
    const t = await post('/echo', 'hello text', 'text/plain');
    assert.equal(t.json.type, 'string');
    assert.equal(t.json.body, 'hello text');
    const f = await post('/echo', 'a=1&b=2', 'application/x-www-form-urlencoded');
    assert.equal(f.json.body, 'a=1&b=2');
    const b = await post('/echo', Buffer.from([0xde, 0xad, 0xbe, 0xef]), 'application/octet-stream');
    assert.equal(b.json.type, 'buffer');
    assert.equal(b.json.body, 'deadbeef');
    assert.equal(b.json.raw, 4);
    const untyped = await post('/echo', 'abc');
    assert.equal(untyped.json.type, 'buffer');
  });

  it('answers 400 to invalid JSON without calling the handler', async () => {
    const before = (await rt.request('/calls')).json.calls;
    const r = await post('/echo', '{not json', 'application/json');
    assert.equal(r.status, 400);
    assert.match(r.json.error, /not valid JSON/);
    assert.equal((await rt.request('/calls')).json.calls, before);
  });

  it('reads chunked bodies and refuses bodies over the cap with 413', async () => {
    const ok = await rt.request('/slow-upload', { method: 'PUT', headers: { 'transfer-encoding': 'chunked' }, body: Buffer.alloc(1000, 1) });
    assert.deepEqual(ok.json, { size: 1000 });
    const big = await post('/echo', Buffer.alloc(64 * 1024 + 1), 'application/octet-stream');
    assert.equal(big.status, 413);
    const bigChunked = await rt.request('/echo', { method: 'POST', headers: { 'transfer-encoding': 'chunked' }, body: Buffer.alloc(200 * 1024) }).catch((e) => e);
    // The worker answers 413 and closes; the client may see the answer or a reset while still sending.
    if (!(bigChunked instanceof Error)) assert.equal(bigChunked.status, 413);
    assert.equal((await rt.request('/healthz')).status, 200);
  });

  it('encodes string, Buffer, object and empty bodies', async () => {
    const t = await rt.request('/text');
    assert.equal(t.text, 'plain text');
    assert.match(String(t.headers['content-type']), /^text\/plain/);
    const b = await rt.request('/binary');
    assert.deepEqual([...b.body], [0, 1, 2, 255]);
    assert.equal(b.headers['content-type'], 'application/octet-stream');
    const h = await rt.request('/typed');
    assert.equal(h.headers['content-type'], 'text/html');
    const n = await rt.request('/nobody');
    assert.equal(n.status, 204);
    assert.equal(n.body.length, 0);
    const d = await rt.request('/other/path?q=1', { method: 'DELETE' });
    assert.equal(d.status, 200, 'status defaults to 200');
    assert.equal(d.text, 'default DELETE /other/path?q=1');
  });

  it('turns a throw, a rejection, undefined and a bad status into a JSON 500 with the stack on stderr', async () => {
    for (const [p, message] of [
      ['/throw', 'boom-thrown'],
      ['/reject', 'boom-rejected'],
      ['/undefined', 'returned nothing'],
      ['/badstatus', 'invalid status'],
    ]) {
      const r = await rt.request(p);
      assert.equal(r.status, 500, p);
      assert.equal(r.json.error, 'function error');
      assert.match(r.json.message, new RegExp(message));
    }
    await eventually(() => /Error: boom-thrown\n\s+at /.test(rt.stderr()), 'the thrown stack on stderr');
    await eventually(() => rt.stderr().includes('TypeError: boom-rejected'), 'the rejection on stderr');
  });

  it('lets the handler stream through context.response and ignores its return value', async () => {
    const r = await rt.request('/stream');
    assert.equal(r.status, 200);
    assert.equal(r.text, 'chunk0;chunk1;chunk2;chunk3;chunk4;done');
    const readable = await rt.request('/readable');
    assert.equal(readable.text, 'abc');
  });

  it('cuts the connection when a handler fails after it started streaming', async () => {
    const r = await rt.request('/stream-then-throw').catch((e: Error) => e);
    assert.ok(r instanceof Error, 'the client sees a broken response, not a complete one');
    await eventually(() => rt.stderr().includes('boom-mid-stream'), 'the error on stderr');
    assert.equal((await rt.request('/healthz')).status, 200);
  });

  it('sends context.log output to stdout and stderr', async () => {
    assert.equal((await rt.request('/log')).text, 'logged');
    await eventually(() => rt.stdout().includes('log-line-to-stdout'), 'the log line on stdout');
    await eventually(() => rt.stderr().includes('log-line-to-stderr'), 'the log line on stderr');
  });

  it('keeps control routes for the executor and gives routed requests to the function', async () => {
    assert.equal((await rt.request('/healthz')).text, 'ok\n');
    const routed = await rt.request('/healthz', { headers: { 'x-flint-function-name': 'f' } });
    assert.equal(routed.text, 'the function own healthz');
    const spec = await rt.request('/specialize', { method: 'POST', headers: { 'x-flint-function-name': 'f' } });
    assert.equal(spec.text, 'default POST /specialize');
  });

  it('keeps connections alive across requests', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    agent.on('free', (socket) => sockets.add(socket));
    try {
      for (let i = 0; i < 3; i++) assert.equal((await rt.request('/text', { agent })).status, 200);
      assert.equal(sockets.size, 1);
    } finally {
      agent.destroy();
    }
  });

  it('survives clients that abort during the upload or before the answer', async () => {
    await new Promise<void>((resolve, reject) => {
      const s = net.connect(rt.socket, () => {
        s.write('POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"partial":');
        setImmediate(() => {
          s.destroy();
          resolve();
        });
      });
      s.on('error', reject);
    });
    await new Promise<void>((resolve, reject) => {
      const s = net.connect(rt.socket, () => {
        s.end('GET /stream HTTP/1.1\r\nhost: x\r\n\r\n');
        s.destroy();
        resolve();
      });
      s.on('error', reject);
    });
    assert.equal((await rt.request('/text')).text, 'plain text');
  });
});

describe('node runtime: callback form and crashes', () => {
  it('supports (context, callback) handlers', async () => {
    const cb = await startRuntime();
    try {
      const dir = cb.write({
        'index.js': `module.exports = (context, callback) => {
          if (context.request.path === '/fail') throw new Error('cb-throw');
          setImmediate(() => callback(202, { got: context.request.body }, { 'x-cb': '1' }));
        };`,
      });
      assert.equal((await cb.specialize({ filepath: path.join(dir, 'index.js') })).status, 200);
      const r = await cb.request('/', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
      assert.equal(r.status, 202);
      assert.equal(r.headers['x-cb'], '1');
      assert.deepEqual(r.json, { got: { a: 1 } });
      const f = await cb.request('/fail');
      assert.equal(f.status, 500);
      assert.match(f.json.message, /cb-throw/);
    } finally {
      await cb.stop();
    }
  });

  it('a worker that exits mid-request fails that request', async () => {
    const crash = await startRuntime();
    try {
      const dir = crash.write({ deployarchive: HANDLER });
      assert.equal((await crash.specialize({ filepath: path.join(dir, 'deployarchive') })).status, 200);
      const r = await crash.request('/crash').catch((e: Error) => e);
      assert.ok(r instanceof Error);
      assert.equal(await crash.exited, 7);
    } finally {
      await crash.stop();
    }
  });
});
