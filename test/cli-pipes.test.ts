// The CLI as a shell pipeline's first command: a reader that stops early
// (`flint fn list | head -1`) gets what it read, and the CLI ends quietly
// with exit 0, never an EPIPE stack trace.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { FLINT_BIN, REPO, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;

async function post(plural: string, body: unknown): Promise<void> {
  const res = await fetch(`${server.controllerUrl}/v1/namespaces/default/${plural}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 201, await res.text());
}

describe('the CLI in a pipeline', { timeout: 60_000 }, () => {
  before(async () => {
    server = await startServer({ sets: ['executor.sandbox=none', 'executor.poolSize=0'] });
    await post('environments', { metadata: { name: 'nodejs' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 0 } });
    await post('packages', { metadata: { name: 'p' }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: Buffer.from('module.exports = async () => ({});').toString('base64') } } });
    // Enough rows that the table is still being written when the reader goes.
    for (let i = 0; i < 60; i++) await post('functions', { metadata: { name: `f${i}` }, spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'p' } } } });
  });
  after(async () => {
    await server?.stop();
  });

  it('ends with exit 0 and no stack trace when the reader closes the pipe after the first line', async () => {
    const child = spawn(process.execPath, [FLINT_BIN, 'fn', 'list'], { cwd: REPO, env: server.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c) => (stderr += c));
    const first = await new Promise<string>((resolve) => child.stdout.once('data', (c: Buffer) => resolve(c.toString())));
    // What `head -1` does once it has its line.
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    assert.match(first, /^NAME\s+ENV/);
    assert.equal(stderr, '', 'nothing on stderr');
    assert.equal(code, 0);
  });
});
