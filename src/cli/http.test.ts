// The CLI's node:http client against a real server: bodies both ways,
// failures as codes, and a deadline that covers the body too.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type HttpFailure, httpRequest } from './http.ts';

let server: http.Server;
let base: string;

before(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/slow-body') {
        res.writeHead(200);
        res.write('part');
        return; // never ends
      }
      if (req.url === '/stream') {
        res.writeHead(200, { 'x-many': ['a', 'b'] });
        res.write('one ');
        setTimeout(() => res.end('two'), 20);
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ method: req.method, type: req.headers['content-type'], length: req.headers['content-length'] ?? null, body: Buffer.concat(chunks).toString() }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

describe('CLI http client', () => {
  it('sends a string body with its length and reads JSON back', async () => {
    const res = await httpRequest(`${base}/x`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'héllo' });
    assert.equal(res.status, 201);
    assert.equal(res.ok, true);
    assert.deepEqual(await res.json(), { method: 'POST', type: 'text/plain', length: '6', body: 'héllo' });
  });

  it('streams a file as the body', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'flint-http-')), 'f');
    fs.writeFileSync(file, 'x'.repeat(100_000));
    try {
      const res = await httpRequest(`${base}/up`, { method: 'POST', body: fs.createReadStream(file) });
      assert.equal(((await res.json()) as { body: string }).body.length, 100_000);
    } finally {
      fs.rmSync(path.dirname(file), { recursive: true, force: true });
    }
  });

  it('gives the body as it arrives, and joins repeated headers', async () => {
    const res = await httpRequest(`${base}/stream`, { method: 'GET' });
    assert.equal(res.header('X-Many'), 'a, b');
    const parts: string[] = [];
    for await (const c of res.chunks()) parts.push(c.toString());
    assert.equal(parts.join(''), 'one two');
  });

  it('fails with the system code when nothing answers, and refuses other schemes', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    await assert.rejects(httpRequest(`http://127.0.0.1:${port}/`, { method: 'GET' }), (err: HttpFailure) => err.code === 'ECONNREFUSED');
    await assert.rejects(httpRequest('ftp://example.test/', { method: 'GET' }), (err: HttpFailure) => err.code === 'EPROTO');
  });

  it('gives up at the deadline, also while the body is still coming', async () => {
    const res = await httpRequest(`${base}/slow-body`, { method: 'GET', timeoutMs: 200 });
    assert.equal(res.status, 200);
    await assert.rejects(res.text(), (err: Error) => err.name === 'TimeoutError');
  });
});
