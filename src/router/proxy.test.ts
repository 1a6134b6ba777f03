// ProxyCall on its own, with a stand-in pool and response: what reaches the
// instance connection after the call has ended. The router tests cover the
// same class end to end.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { FunctionResource } from '../api/kinds.ts';
import type { Executor, Lease } from '../executor/types.ts';
import type { Http1Request } from './http1/request.ts';
import type { HeaderLines, Http1Response, ResponseWatcher } from './http1/response.ts';
import { RouterMetrics } from './metrics.ts';
import { ProxyCall } from './proxy.ts';
import { FnTarget } from './targets.ts';
import { Tunnels } from './tunnel.ts';
import type { Upstreams } from './upstreams.ts';
import type { ResponseHandler } from './worker-client/types.ts';

const fn = {
  apiVersion: 'flint.dev/v1',
  kind: 'Function',
  metadata: { name: 'hello', namespace: 'default', uid: 'u1', resourceVersion: '1', generation: 1 },
  spec: { environment: { name: 'node' }, package: { packageref: { name: 'p' } } },
} as FunctionResource;

/** A response that records what the proxy does to it, as the router's client connection would. */
class FakeResponse {
  watcher: ResponseWatcher | undefined = undefined;
  statusCode = 200;
  headersSent = false;
  finished = false;
  body: Buffer[] = [];
  writeHead(status: number): this {
    this.statusCode = status;
    this.headersSent = true;
    return this;
  }
  /** What writeHeadWith() was given: the head lines and the header after them. */
  head: { lines: HeaderLines; name: string; value: string } | undefined;
  writeHeadWith(status: number, lines: HeaderLines, name: string, value: string): this {
    this.head = { lines, name, value };
    return this.writeHead(status);
  }
  write(chunk: Buffer): boolean {
    this.body.push(chunk);
    // The client is slow: every write asks the proxy to wait for a drain.
    return false;
  }
  end(chunk?: Buffer): void {
    if (chunk !== undefined) this.body.push(chunk);
    this.finished = true;
  }
  destroy(): void {
    this.finished = true;
  }
}

function setup() {
  const released: string[] = [];
  const lease: Lease = { instanceId: 'i1', socketPath: '/nowhere', coldStart: false, release: (o = 'ok') => released.push(o) };
  let handler: ResponseHandler | undefined;
  const deps = {
    executor: { tryAcquire: () => lease } as unknown as Executor,
    upstreams: { poolFor: () => ({ dispatch: (_o: unknown, h: ResponseHandler) => (handler = h) }) } as unknown as Upstreams,
    metrics: new RouterMetrics(),
    logger: pino({ level: 'silent' }),
    tunnels: new Tunnels(),
  };
  const req = { method: 'GET', body: null, upgrade: undefined, socket: { destroyed: false } } as unknown as Http1Request;
  const res = new FakeResponse();
  const call = new ProxyCall(deps, req, res as unknown as Http1Response, new FnTarget(fn), 'req-1', '/', [], false, performance.now());
  call.start();
  assert.ok(handler, 'the call was dispatched to the pool');
  return { call, handler, res, released };
}

describe('ProxyCall', () => {
  it("resumes the instance connection on its client's drain while the response runs, never after it has ended", () => {
    const { call, handler, res, released } = setup();
    let resumed = 0;
    handler.onStart(() => {});
    handler.onHeaders(200, ['Content-Type', 'text/plain'], () => resumed++);
    assert.equal(handler.onData(Buffer.from('a'), false), false, 'the slow client pushes back');
    res.watcher?.drained();
    assert.equal(resumed, 1);
    handler.onData(Buffer.from('b'), true);
    handler.onComplete();
    assert.deepEqual(released, ['ok']);
    assert.equal(res.watcher, undefined, 'the ended call no longer watches the response');
    // The instance connection now carries another request; a late drain of this one must not resume it.
    call.drained();
    assert.equal(resumed, 1, 'a drain after the end does not resume the connection');
    assert.equal(Buffer.concat(res.body).toString(), 'ab');
  });

  it("writes the function's headers for the client once per remembered head, each response with its own request id", () => {
    // The worker client's parser gives every response that repeats a head the same frozen list.
    const remembered = Object.freeze(['Content-Type', 'text/plain', 'Connection', 'keep-alive, X-Hop', 'X-Hop', '1', 'X-Flint-Request-Id', 'forged']);
    const heads = [];
    for (const list of [remembered, remembered, [...remembered], [...remembered]]) {
      const { handler, res } = setup();
      handler.onStart(() => {});
      handler.onHeaders(200, list, () => {});
      assert.ok(res.head);
      heads.push(res.head);
    }
    assert.equal(heads[0].lines.text, 'Content-Type: text/plain\r\n', 'hop-by-hop headers, those Connection names and a forged request id are dropped');
    assert.deepEqual(
      heads.map((h) => [h.name, h.value]),
      Array(4).fill(['X-Flint-Request-Id', 'req-1']),
    );
    assert.equal(heads[1].lines, heads[0].lines, 'made once for the remembered list');
    assert.notEqual(heads[3].lines, heads[2].lines, 'a list that is not frozen is not kept');
    assert.equal(heads[3].lines.text, heads[0].lines.text);
  });

  it('lets a client that goes away after the end change nothing', () => {
    const { call, handler, released } = setup();
    let aborted = 0;
    handler.onStart(() => aborted++);
    handler.onHeaders(200, [], () => {});
    handler.onData(Buffer.from('x'), true);
    handler.onComplete();
    call.clientClosed();
    assert.equal(aborted, 0);
    assert.deepEqual(released, ['ok']);
  });
});
