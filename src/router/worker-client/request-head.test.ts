import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UpstreamError } from './errors.ts';
import { requestHead } from './request-head.ts';
import type { UpstreamRequest } from './types.ts';

const req = (o: Partial<UpstreamRequest> = {}): UpstreamRequest => ({ method: 'GET', path: '/p', headers: ['X-Id', '1'], body: null, timeoutMs: 0, ...o });

describe('requestHead', () => {
  it("sends a request's fixed list after Host and before its own headers, the same for every request sharing the list", () => {
    const fixed = ['X-Flint-Function-Name', 'hello', 'X-Flint-Function-Uid', 'u1'];
    for (const id of ['1', '2']) {
      const head = requestHead(req({ fixed, headers: ['X-Id', id] }), 'localhost');
      assert.ok(!(head instanceof UpstreamError));
      assert.equal(head.text, `GET /p HTTP/1.1\r\nHost: localhost\r\nX-Flint-Function-Name: hello\r\nX-Flint-Function-Uid: u1\r\nX-Id: ${id}\r\n\r\n`);
    }
  });

  it('refuses a fixed list with a bad name or a control character in a value, on every request that carries it', () => {
    for (const fixed of [['X-Ok', 'a\r\nX-Evil: 1'], ['Bad Name', 'x'], ['X-Wide', 'caf\u0100']]) {
      for (let i = 0; i < 2; i++) {
        const head = requestHead(req({ fixed }), 'localhost');
        assert.ok(head instanceof UpstreamError, `${JSON.stringify(fixed)} is refused`);
        assert.equal(head.code, 'UPSTREAM_BAD_REQUEST');
      }
    }
  });

  it('still checks the per-request headers after a fixed list', () => {
    const head = requestHead(req({ fixed: ['X-A', 'b'], headers: ['X-Id', 'a\nb'] }), 'localhost');
    assert.ok(head instanceof UpstreamError);
    assert.match(head.message, /X-Id/);
  });
});
