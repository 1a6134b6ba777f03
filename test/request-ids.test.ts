// Debugging by request id, end to end (issue 27, item 4): a real server with
// router.accessLog=true, the real CLI, real workers. A request's id reaches
// the function as X-Flint-Request-Id and tags what it prints; `fn log`
// picks those lines by request and instance; a failing `fn test` shows them
// with the id; the access log has one JSON line per request. A client's id
// that is not one (escapes, line breaks, too long) is never copied into
// headers or logs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

function ok(args: string[]): string {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

const SANE_ID = /^[\x21-\x7e]{1,192}$/;

/** Says which id it was given, prints a line on each stream, fails when asked. */
const CODE = `
module.exports = async (context) => {
  const id = context.request.headers['x-flint-request-id'];
  console.log('handling', context.request.query.who);
  await new Promise((r) => setTimeout(r, 5));
  console.error('still on it for', context.request.query.who);
  if (context.request.query.fail) throw new Error('failing-on-purpose for ' + context.request.query.who);
  return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id }) };
};`;

async function call(pathAndQuery: string, headers: Record<string, string> = {}) {
  const res = await fetch(server.routerUrl + pathAndQuery, { headers });
  return { status: res.status, id: res.headers.get('x-flint-request-id'), text: await res.text() };
}

/** One request written byte by byte, for header values fetch would refuse to send. */
function rawGet(pathAndQuery: string, headerLines: string): Promise<string> {
  const { hostname, port } = new URL(server.routerUrl);
  return new Promise((resolve, reject) => {
    // Not end(): a client that half-closes has gone away, as far as the router can tell. The server closes after its answer.
    const sock = net.connect(Number(port), hostname, () => sock.write(`GET ${pathAndQuery} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headerLines}\r\n`));
    let out = '';
    sock.setEncoding('latin1');
    sock.on('data', (c) => (out += c));
    sock.on('end', () => resolve(out));
    sock.on('error', reject);
  });
}

/** The access log: the JSON lines of the server's output that are access entries. */
function accessEntries(): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const line of server.output().split('\n')) {
    if (!line.startsWith('{"time"')) continue;
    const e = JSON.parse(line);
    if ('requestId' in e && 'durationMs' in e) out.push(e);
  }
  return out;
}

describe('debugging by request id', () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-reqid-'));
    server = await startServer({ sets: ['router.accessLog=true'] });
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    fs.writeFileSync(path.join(work, 'reqlog.js'), CODE);
    ok(['fn', 'create', '--name', 'reqlog', '--env', 'nodejs', '--code', path.join(work, 'reqlog.js')]);
    ok(['route', 'create', '--name', 'reqlog', '--url', '/reqlog', '--function', 'reqlog']);
    await eventually(async () => (await call('/reqlog?who=warmup')).status === 200, 'the function to answer');
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it("passes the client's id to the function and tags its lines; fn log --request-id, --instance and --detail pick them", async () => {
    const one = await call('/reqlog?who=first', { 'x-flint-request-id': 'sys-req-1' });
    assert.equal(one.status, 200, one.text);
    assert.equal(one.id, 'sys-req-1');
    assert.deepEqual(JSON.parse(one.text), { id: 'sys-req-1' });
    const two = await call('/reqlog?who=second');
    assert.match(two.id ?? '', SANE_ID, 'the router mints an id when the client sends none');
    assert.deepEqual(JSON.parse(two.text), { id: two.id });

    const mine = await eventually(() => {
      const out = ok(['fn', 'log', '--name', 'reqlog', '--request-id', 'sys-req-1']);
      return out.includes('still on it for first') ? out : undefined;
    }, "request sys-req-1's lines in fn log");
    const lines = mine.trimEnd().split('\n');
    assert.equal(lines.length, 2, mine);
    assert.match(lines[0], /^\S+ request=sys-req-1 \[stdout\] handling first$/);
    assert.match(lines[1], /^\S+ request=sys-req-1 \[stderr\] still on it for first$/);
    const theirs = await eventually(() => {
      const out = ok(['fn', 'log', '--name', 'reqlog', '--request-id', two.id as string]);
      return out.includes('still on it for second') ? out : undefined;
    }, "the second request's lines");
    assert.ok(!theirs.includes('first'), theirs);

    // The plain log has every request's lines, each with its id.
    const all = ok(['fn', 'log', '--name', 'reqlog']);
    assert.match(all, /request=sys-req-1 \[stdout\] handling first\n/);
    assert.match(all, new RegExp(`request=${two.id?.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\[stdout\\] handling second\\n`));

    const pods = JSON.parse(ok(['fn', 'pods', '--name', 'reqlog', '-o', 'json'])) as { items: Array<{ name: string }> };
    assert.equal(pods.items.length, 1);
    const instance = pods.items[0].name;
    const byInstance = ok(['fn', 'log', '--name', 'reqlog', '--instance', instance]);
    assert.match(byInstance, /handling first/);
    assert.equal(ok(['fn', 'log', '--name', 'reqlog', '--pod', instance]), byInstance, '--pod is --instance');
    assert.equal(ok(['fn', 'log', '--name', 'reqlog', '--instance', 'no-such-instance']), '');
    const detail = ok(['fn', 'log', '--name', 'reqlog', '--request-id', 'sys-req-1', '--detail']);
    assert.equal(detail.split('\n')[1], `=== Function=reqlog Environment=nodejs Namespace=default Instance=${instance}`);
    assert.match(detail, /handling first/);
  });

  it("prints a failing fn test's error line, then the function's lines for that request, then its id", async () => {
    const r = flint(server, ['fn', 'test', '--name', 'reqlog', '-q', 'who=tester', '-q', 'fail=1'], { cwd: work });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, '');
    const lines = r.stderr.trimEnd().split('\n');
    assert.match(lines[0], /^Error: Error calling function reqlog: 500; Please try again or fix the error: /);
    const idLine = lines.findIndex((l) => l.startsWith('Request ID: '));
    assert.ok(idLine > 0, r.stderr);
    const id = lines[idLine].slice('Request ID: '.length);
    assert.match(id, SANE_ID);
    const between = lines.slice(1, idLine).join('\n');
    assert.match(between, new RegExp(`request=${id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\[stdout\\] handling tester`));
    assert.match(between, /\[stderr\] still on it for tester/);
    assert.match(between, /failing-on-purpose for tester/);
    assert.ok(!between.includes('first'), 'only the lines of this request');
    assert.equal(lines.at(-1), 'Error: error getting function response');
    // The id it printed is the one fn log knows.
    assert.match(ok(['fn', 'log', '--name', 'reqlog', '--request-id', id]), /failing-on-purpose for tester/);
  });

  it('writes one JSON access line per request: method, path, function, status, duration, request id, instance', async () => {
    const hit = await call('/reqlog?who=logged&secret=s3cr3t', { 'x-flint-request-id': 'sys-access-1' });
    assert.equal(hit.status, 200);
    const miss = await call('/nothing-here', { 'x-flint-request-id': 'sys-access-2' });
    assert.equal(miss.status, 404);
    const [entry, missed] = await eventually(() => {
      const all = accessEntries();
      const e = all.find((x) => x.requestId === 'sys-access-1');
      const m = all.find((x) => x.requestId === 'sys-access-2');
      return e && m ? [e, m] : undefined;
    }, 'both requests in the access log');
    assert.equal(entry.method, 'GET');
    assert.equal(entry.path, '/reqlog', 'the query (which may carry secrets) is not logged');
    assert.equal(entry.function, 'default/reqlog');
    assert.equal(entry.status, 200);
    assert.equal(typeof entry.durationMs, 'number');
    assert.match(String(entry.instance), /^nodejs-[0-9a-f]+$/);
    assert.ok(!server.output().includes('s3cr3t'));
    assert.deepEqual({ ...missed, time: 0, durationMs: 0 }, { time: 0, method: 'GET', path: '/nothing-here', function: null, status: 404, durationMs: 0, requestId: 'sys-access-2', instance: null });
  });

  it("never copies a client's id with escapes, line breaks or too many characters into headers or logs", async () => {
    const evil = {
      ansi: '\x1b[31mEVIL\x1b[0m',
      newline: 'abc\ninjected: yes',
      carriage: 'abc\rinjected',
      long: `L${'x'.repeat(300)}`,
      space: 'two words',
    };
    for (const [what, id] of Object.entries(evil)) {
      const reply = await rawGet(`/reqlog?who=${what}`, `X-Flint-Request-Id: ${id}\r\n`);
      const status = Number(reply.slice(9, 12));
      const head = reply.slice(0, reply.indexOf('\r\n\r\n'));
      const echoed = /\r\nX-Flint-Request-Id: ([^\r\n]*)/i.exec(head)?.[1];
      assert.ok(status === 200 || status === 400, `${what}: ${reply.slice(0, 200)}`);
      assert.ok(echoed !== undefined, `${what}: every answer carries an id`);
      assert.match(echoed, SANE_ID, what);
      assert.notEqual(echoed, id, `${what}: the raw id is not sent back`);
      assert.ok(!head.toLowerCase().includes('injected'), `${what}: no header of the client's making`);
      if (status === 200) assert.equal(/\{"id":"[^"]*"\}/.exec(reply)?.[0], JSON.stringify({ id: echoed }), `${what}: the function got the router's own id`);
    }
    // Nothing of them in the access log, the function's log or the server's output.
    await eventually(() => accessEntries().some((e) => String(e.path) === '/reqlog' && e.status === 200 && e.requestId !== 'sys-req-1'), 'the access lines');
    const output = server.output();
    for (const id of Object.values(evil)) {
      assert.ok(!output.includes(id), `raw id in the server output: ${JSON.stringify(id)}`);
      assert.ok(!output.includes(JSON.stringify(id).slice(1, -1)), `escaped id in the server output: ${JSON.stringify(id)}`);
    }
    for (const e of accessEntries()) assert.match(String(e.requestId), SANE_ID);
    const log = ok(['fn', 'log', '--name', 'reqlog']);
    assert.ok(!log.includes('\x1b') && !log.includes('EVIL') && !log.includes('xxxxxxxxxx') && !log.includes('injected'), log);

    // A filter is untrusted too: refused by the CLI before any request, and by the API.
    for (const id of [evil.ansi, evil.newline, evil.long, evil.space]) {
      const r = flint(server, ['fn', 'log', '--name', 'reqlog', '--request-id', id], { cwd: work });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /^Error: --request-id must be 1-192 printable ASCII characters without spaces\n$/);
    }
    const api = await fetch(`${server.controllerUrl}/v1/namespaces/default/functions/reqlog/logs?requestId=${encodeURIComponent(evil.ansi)}`);
    assert.equal(api.status, 400);
    assert.equal(((await api.json()) as { code: string }).code, 'FLINT_ERR_VALIDATION');
  });
});
