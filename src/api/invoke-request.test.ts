// The dashboard's test-call request attacked: header injection, reserved
// headers, path escapes, oversized bodies, wrong types. Each is refused
// naming the field, before any request is sent.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_INVOKE_BODY, validateInvokeRequest } from './invoke-request.ts';

function refused(body: unknown, field: string | undefined): void {
  assert.throws(
    () => validateInvokeRequest(body),
    (err: any) => err.code === 'FLINT_ERR_VALIDATION' && err.field === field,
    JSON.stringify(body).slice(0, 200),
  );
}

describe('invoke request', () => {
  it('normalizes a good request', () => {
    assert.deepEqual(validateInvokeRequest({ method: 'POST', path: 'a/b', headers: { 'X-Y': 'z' }, query: [['n', 'v'], ['n', 'w']], body: '{}' }), {
      method: 'POST',
      path: '/a/b',
      headers: { 'X-Y': 'z' },
      query: [['n', 'v'], ['n', 'w']],
      body: '{}',
    });
    assert.deepEqual(validateInvokeRequest({ method: 'GET' }), { method: 'GET', path: '/', headers: {}, query: [], body: undefined });
  });

  it('refuses what would change the request the server sends', () => {
    refused(null, undefined);
    refused([], undefined);
    refused({ method: 'GET', extra: 1 }, 'extra');
    refused({ method: 'CONNECT' }, 'method');
    refused({ method: 'TRACE' }, 'method');
    refused({ body: '' }, 'method');
    refused({ method: 'get' }, 'method');
    refused({ method: 'GET', headers: { 'X-A': 'v\r\nX-Injected: 1' } }, 'headers.X-A');
    refused({ method: 'GET', headers: { 'X-A': 'v\0' } }, 'headers.X-A');
    refused({ method: 'GET', headers: { 'Bad Name': 'v' } }, 'headers.Bad Name');
    refused({ method: 'GET', headers: { Host: 'evil.example' } }, 'headers.Host');
    refused({ method: 'GET', headers: { 'Transfer-Encoding': 'chunked' } }, 'headers.Transfer-Encoding');
    refused({ method: 'GET', headers: { 'Content-Length': '0' } }, 'headers.Content-Length');
    refused({ method: 'GET', headers: { a: 1 } }, 'headers.a');
    refused({ method: 'GET', headers: 'x' }, 'headers');
    refused({ method: 'GET', path: '/../other-function' }, 'path');
    refused({ method: 'GET', path: '/a/%2e%2e/b' }, 'path');
    refused({ method: 'GET', path: '/a?b' }, 'path');
    refused({ method: 'GET', path: '/a#b' }, 'path');
    refused({ method: 'GET', path: '//evil.example/x y' }, 'path');
    refused({ method: 'GET', path: 7 }, 'path');
    refused({ method: 'GET', query: [['a']] }, 'query[0]');
    refused({ method: 'GET', query: [['', 'v']] }, 'query[0]');
    refused({ method: 'GET', query: { a: 'b' } }, 'query');
    refused({ method: 'POST', body: 'x'.repeat(MAX_INVOKE_BODY + 1) }, 'body');
    refused({ method: 'POST', body: 3 }, 'body');
    refused({ method: 'GET', body: 'x' }, 'body');
  });
});
