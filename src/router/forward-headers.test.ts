import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { endToEndHeaders, requestClasses, scanRequest, switchHeaders } from './forward-headers.ts';

describe('endToEndHeaders', () => {
  it('drops hop-by-hop headers in any case, and the ones Connection names, keeping the rest verbatim', () => {
    const raw = [
      'Content-Type', 'text/plain',
      'CONNECTION', 'keep-alive, X-Private',
      'Keep-Alive', 'timeout=5',
      'Proxy-Connection', 'keep-alive',
      'Proxy-Authenticate', 'Basic',
      'transfer-encoding', 'chunked',
      'Trailer', 'X-Sum',
      'Upgrade', 'h2c',
      'x-flint-request-id', 'forged',
      'x-private', 'secret',
      'X-Keep', 'yes',
      'Set-Cookie', 'a=1',
      'Set-Cookie', 'b=2',
    ];
    assert.deepEqual(endToEndHeaders(raw), [
      'Content-Type', 'text/plain',
      'X-Keep', 'yes',
      'Set-Cookie', 'a=1',
      'Set-Cookie', 'b=2',
    ]);
  });
});

describe('switchHeaders', () => {
  it("gives a 101 the function's end-to-end headers, the router's request id in place of a forged one, and the switch", () => {
    const raw = ['Upgrade', 'websocket', 'Connection', 'Upgrade', 'Sec-WebSocket-Accept', 'abc', 'x-flint-request-id', 'forged', 'Content-Length', '0'];
    assert.deepEqual(switchHeaders(raw, 'X-Flint-Request-Id', 'rid-1'), [
      'Sec-WebSocket-Accept', 'abc',
      'X-Flint-Request-Id', 'rid-1',
      'Connection', 'Upgrade',
      'Upgrade', 'websocket',
    ]);
    assert.equal(switchHeaders(['Connection', 'Upgrade'], 'X-Flint-Request-Id', 'rid-1'), undefined);
  });
});

describe('scanRequest', () => {
  it('keeps end-to-end headers, takes out the ones the router sets, and sees a body from its framing', () => {
    const s = scanRequest([
      'Host', 'example.com',
      'X-Flint-Function-Name', 'forged',
      'X-Flint-Params-Id', 'forged',
      'X-Forwarded-For', '10.0.0.1',
      'Connection', 'keep-alive, X-Hop',
      'X-Hop', 'gone',
      'Content-Length', '3',
      'Accept', '*/*',
    ]);
    assert.deepEqual(s.headers, ['Content-Length', '3', 'Accept', '*/*']);
    assert.equal(s.host, 'example.com');
    assert.equal(s.forwardedFor, '10.0.0.1');
    assert.equal(s.hasBody, true);
    assert.equal(scanRequest(['Content-Length', '0']).hasBody, false);
    assert.equal(scanRequest(['Transfer-Encoding', 'chunked']).hasBody, true);
  });
});

describe('request classes', () => {
  it("keeps the caller's Authorization from the function when told to, in any case, and only that", () => {
    const raw = ['AUTHORIZATION', 'Bearer caller', 'X-Other', 'kept', 'Proxy-Authorization', 'Basic eA=='];
    assert.deepEqual(scanRequest(raw, requestClasses({ forwardAuthorization: false })).headers, ['X-Other', 'kept']);
    assert.deepEqual(scanRequest(raw, requestClasses({ forwardAuthorization: true })).headers, ['AUTHORIZATION', 'Bearer caller', 'X-Other', 'kept']);
  });
});
