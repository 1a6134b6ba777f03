// Roles apart (kubernetes mode), the executor leader writes function logs
// and the controller serves them: `flint fn log` reads the leader's file
// through the executor service. Real sockets end to end: the controller's
// route, the service client, the executor service and a log file on disk in
// the executor's data directory (the controller's own holds a decoy).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { FunctionResource } from '../../api/kinds.ts';
import { type DataLayout, dataLayout, functionLogFile } from '../../config/layout.ts';
import { createController } from '../../controller/app.ts';
import { localLogSource } from '../../controller/logs.ts';
import { openSqliteStore } from '../../store/sqlite.ts';
import type { Store } from '../../store/store.ts';
import { ExecutorService, type GrantingExecutor } from './executor-service.ts';
import { LOG_HEADERS, PATHS } from './protocol.ts';
import { ExecutorServiceClient } from './service-client.ts';

const TOKEN = 'logs-test-token';
const NS = '/v1/namespaces/default/functions';
const notUsed = (): never => {
  throw new Error('not used by the log routes');
};
const executor: GrantingExecutor = { acquire: notUsed, leaseInstance: notUsed, instances: notUsed };

describe('function logs through the executor leader (roles apart)', () => {
  let dir: string;
  let executorLayout: DataLayout;
  let controllerLayout: DataLayout;
  let store: Store;
  let service: ExecutorService;
  let serviceUrl: string;
  let leading = true;
  let reads = 0;
  let controller: FastifyInstance;
  let base: string;
  let file: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-split-logs-'));
    executorLayout = dataLayout(path.join(dir, 'executor'));
    controllerLayout = dataLayout(path.join(dir, 'controller'));
    service = new ExecutorService({
      host: '127.0.0.1',
      port: 0,
      identity: 'leader',
      token: TOKEN,
      logger: pino({ level: 'silent' }),
      leader: () => (leading ? executor : undefined),
      functionLogs: (ns, name, from) => {
        reads++;
        return localLogSource(executorLayout)(ns, name, from);
      },
    });
    serviceUrl = await service.start();
    const client = new ExecutorServiceClient({ leaderUrl: () => serviceUrl, token: TOKEN, reachMs: 1000 });
    fs.mkdirSync(controllerLayout.root, { recursive: true });
    store = openSqliteStore(path.join(controllerLayout.root, 'flint.db'));
    controller = await createController({
      store,
      layout: controllerLayout,
      info: () => ({ version: 't', mode: 'kubernetes', routerUrl: 'http://127.0.0.1:1', authentication: { enabled: false, authUriPath: '/auth/login' } }),
      localImages: false,
      reservedPaths: ['/router-healthz', '/auth/login'],
      functionLogs: (ns, name, from) => client.functionLog(ns, name, from),
    });
    await controller.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(controller.server.address() as { port: number }).port}`;
    await store.create({
      apiVersion: 'flint.dev/v1',
      kind: 'Function',
      metadata: { name: 'hello', namespace: 'default' },
      spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'hello-pkg' } } },
    } as FunctionResource);
    file = functionLogFile(executorLayout, 'default', 'hello');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    // The controller's own directory has a log of the same name: not the one the executor writes.
    const decoy = functionLogFile(controllerLayout, 'default', 'hello');
    fs.mkdirSync(path.dirname(decoy), { recursive: true });
    fs.writeFileSync(decoy, 'decoy\n');
  });

  after(async () => {
    await controller?.close();
    await service?.stop();
    await store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("serves the leader's log: its tail, filtered, and what is appended while following", async () => {
    fs.writeFileSync(file, 't1 instance=pod-a [flint] pod pod-a specialized\nt2 instance=pod-a request=r-1 [stdout] one\nt3 instance=pod-a request=r-2 [stdout] two\n');
    const text = async (q: string) => {
      const res = await fetch(`${base}${NS}/hello/logs${q}`);
      assert.equal(res.status, 200);
      return res.text();
    };
    assert.equal(await text(''), 't1 [flint] pod pod-a specialized\nt2 request=r-1 [stdout] one\nt3 request=r-2 [stdout] two\n');
    assert.equal(await text('?tail=1'), 't3 request=r-2 [stdout] two\n');
    assert.equal(await text('?requestId=r-1'), 't2 request=r-1 [stdout] one\n');

    const ac = new AbortController();
    const res = await fetch(`${base}${NS}/hello/logs?follow=true&tail=0`, { signal: ac.signal });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let seen = '';
    const until = async (want: string) => {
      while (!seen.includes(want)) {
        const { done, value } = await reader.read();
        assert.ok(!done, `the follow ended before ${JSON.stringify(want)}; it had: ${JSON.stringify(seen)}`);
        seen += new TextDecoder().decode(value);
      }
    };
    // A line written in two pieces, the first cut inside a character and read by polls before the rest comes, shows once whole.
    const piece = Buffer.from('t4 instance=pod-a [stdout] vier ü');
    fs.appendFileSync(file, piece.subarray(0, piece.length - 1));
    await new Promise((r) => setTimeout(r, 700));
    fs.appendFileSync(file, Buffer.concat([piece.subarray(piece.length - 1), Buffer.from('\n')]));
    await until('ü\n');
    // Cut and written anew (same file, shorter): followed from its start.
    fs.writeFileSync(file, 't5 [flint] pod pod-b adopted\n');
    await until('adopted\n');
    // Another file in its place, longer than what was read (a new leader's own log): from its start too.
    const other = `${file}.new`;
    fs.writeFileSync(other, `${'t6 [stdout] from the new file\n'.repeat(3)}`);
    fs.renameSync(other, file);
    await until('t6 [stdout] from the new file\n'.repeat(3));
    ac.abort();
    assert.equal(seen, `t4 [stdout] vier ü\nt5 [flint] pod pod-b adopted\n${'t6 [stdout] from the new file\n'.repeat(3)}`);
  });

  it('answers 503 with a JSON body while no executor leads, and the log again once one does', async () => {
    leading = false;
    try {
      const res = await fetch(`${base}${NS}/hello/logs`);
      assert.equal(res.status, 503);
      const body = (await res.json()) as { code: string; message: string };
      assert.equal(body.code, 'FLINT_ERR_UNAVAILABLE');
      assert.match(body.message, /executor leader/);
    } finally {
      leading = true;
    }
    assert.equal((await fetch(`${base}${NS}/hello/logs`)).status, 200);
  });

  it('the service reads no file for a name that is not one, an offset that is not one, or a caller without the token', async () => {
    const before = reads;
    const get = (p: string, auth = `Bearer ${TOKEN}`) => fetch(`${serviceUrl}${p}`, { headers: { authorization: auth } });
    for (const p of [
      `${PATHS.logs}/default/..%2F..%2Fprivate%2Fadmin-token`,
      `${PATHS.logs}/..%2Fprivate/x`,
      `${PATHS.logs}/default/hello%00`,
      `${PATHS.logs}/Default/hello`,
      `${PATHS.logs}/default`,
      `${PATHS.logs}/default/hello/extra`,
      `${PATHS.logs}/default/hello?from=-1`,
      `${PATHS.logs}/default/hello?from=x`,
      `${PATHS.logs}/default/hello?from=1.5`,
      `${PATHS.logs}/default/hello?from=`,
      `${PATHS.logs}/default/hello?from=1e30`,
    ]) {
      const res = await get(p);
      assert.equal(res.status, 400, p);
      assert.equal(((await res.json()) as { code: string }).code, 'FLINT_ERR_VALIDATION', p);
    }
    for (const auth of ['', 'Bearer wrong', `Basic ${TOKEN}`]) {
      const res = await get(`${PATHS.logs}/default/hello`, auth);
      assert.equal(res.status, 401);
    }
    const post = await fetch(`${serviceUrl}${PATHS.logs}/default/hello`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(post.status, 405);
    assert.equal(reads, before, 'no read reached the disk');
    // A link planted where the log goes is refused, not followed.
    const planted = functionLogFile(executorLayout, 'default', 'planted');
    fs.symlinkSync('/etc/passwd', planted);
    await store.create({ ...(await store.get('Function', 'default', 'hello')), metadata: { name: 'planted', namespace: 'default' } } as FunctionResource);
    const res = await get(`${PATHS.logs}/default/planted`);
    assert.equal(res.status, 500);
    assert.equal(((await res.json()) as { code: string }).code, 'FLINT_ERR_UNSAFE_PATH');
    const served = await fetch(`${base}${NS}/planted/logs`);
    assert.equal(served.status, 500, 'nor is it served by the controller');
    assert.equal(((await served.json()) as { code: string }).code, 'FLINT_ERR_UNSAFE_PATH');
  });

  it('reads from an offset, whole lines only, and says where its text starts', async () => {
    fs.writeFileSync(file, 'a\nbb\nccc\n');
    const res = await fetch(`${serviceUrl}${PATHS.logs}/default/hello?from=2`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(await res.text(), 'bb\nccc\n');
    assert.equal(res.headers.get(LOG_HEADERS.start), '2');
    assert.equal(res.headers.get(LOG_HEADERS.next), '9');
    assert.equal(res.headers.get(LOG_HEADERS.size), '9');
    const { dev, ino } = fs.statSync(file);
    assert.equal(decodeURIComponent(res.headers.get(LOG_HEADERS.file) ?? ''), `leader/${dev}:${ino}`, "the leader's identity is part of the file's");
    const past = await fetch(`${serviceUrl}${PATHS.logs}/default/hello?from=100`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(past.headers.get(LOG_HEADERS.start), '0', 'an offset past the end (a replaced file) reads from the start');
    assert.equal(await past.text(), 'a\nbb\nccc\n');
  });
});
