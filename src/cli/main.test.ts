// The CLI in process against a real HTTP server playing the control plane:
// what each command sends, prints and exits with.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Io } from './io.ts';
import { main } from './main.ts';

interface Seen {
  method: string;
  url: string;
  body: any;
}

let server: http.Server;
let base: string;
let seen: Seen[] = [];
let answer: (s: Seen) => { status: number; body: unknown; headers?: Record<string, string> } = (s) => ({ status: s.method === 'POST' ? 201 : 200, body: s.body ?? {} });
let dir: string;

async function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: Io = { out: (t) => (out += t), err: (t) => (err += t), env: { FLINT_URL: base, FLINT_DATA_DIR: path.join(dir, 'none'), ...env }, cwd: dir };
  const code = await main(args, io);
  return { code, out, err };
}

describe('flint CLI', () => {
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-cli-'));
    fs.writeFileSync(path.join(dir, 'hello.js'), 'module.exports = async () => ({ body: "hi" });');
    server = http.createServer((req, res) => {
      let text = '';
      req.on('data', (c) => (text += c));
      req.on('end', () => {
        const s: Seen = { method: req.method as string, url: req.url as string, body: text ? JSON.parse(text) : undefined };
        seen.push(s);
        const a = answer(s);
        res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
        res.end(JSON.stringify(a.body));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('env create sends the spec and prints Fission-style lines', async () => {
    seen = [];
    const r = await run(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--maxmemory', '128', '--externalnetwork']);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, "poolsize not set: the install's executor.poolSize applies (3 unless changed)\nenvironment 'nodejs' created\n");
    assert.equal(seen[0].url, '/v1/namespaces/default/environments');
    assert.deepEqual(seen[0].body.spec, { runtime: { image: 'flint/node-env' }, resources: { requests: {}, limits: { memory: '128Mi' } }, allowAccessToExternalNetwork: true });
  });

  it('fn create --code makes a <fn>-<uuid> package and maps every flag alias', async () => {
    seen = [];
    answer = (s) => (s.method === 'GET' ? { status: 404, body: { code: 'FLINT_ERR_NOT_FOUND', message: 'not found' } } : { status: 201, body: s.body });
    const r = await run(['fn', 'create', '--name', 'hello', '--env', 'nodejs', '--code', 'hello.js', '--ft', '7', '--rpp', '3', '--con', '9', '--yolo', '--entry', 'h', '--idletimeout', '5', '-e', 'A=b=c', '--secret', 's1', '--streaming-idle-timeout', '30', '--streaming-max-duration', '3600', '--streaming-protocol', 'sse']);
    assert.equal(r.code, 0, r.err);
    const pkg = seen.find((s) => s.url.endsWith('/packages'))!.body;
    assert.match(pkg.metadata.name, /^hello-[0-9a-f-]{30,}$/);
    assert.ok(pkg.metadata.name.length <= 62);
    assert.equal(Buffer.from(pkg.spec.deployment.literal, 'base64').toString(), 'module.exports = async () => ({ body: "hi" });');
    const fn = seen.find((s) => s.url.endsWith('/functions') && s.method === 'POST')!.body;
    assert.equal(fn.spec.functionTimeout, 7);
    assert.equal(fn.spec.requestsPerPod, 3);
    assert.equal(fn.spec.concurrency, 9);
    assert.equal(fn.spec.onceOnly, true);
    assert.equal(fn.spec.idletimeout, 5);
    assert.equal(fn.spec.package.functionName, 'h');
    assert.equal(fn.spec.package.packageref.name, pkg.metadata.name);
    assert.deepEqual(fn.spec.env, { A: 'b=c' });
    assert.deepEqual(fn.spec.secrets, [{ name: 's1' }]);
    assert.deepEqual(fn.spec.streaming, { protocol: 'sse', idleTimeoutSeconds: 30, maxDurationSeconds: 3600 });
    assert.equal(r.out, `Package '${pkg.metadata.name}' created\nfunction 'hello' created\n`);
    answer = (s) => ({ status: s.method === 'POST' ? 201 : 200, body: s.body ?? {} });
  });

  it('fn update --streaming-idle-timeout 0 takes the limit away; with no limit or protocol left, streaming goes', async () => {
    const current = { kind: 'Function', metadata: { name: 'feed', namespace: 'default' }, spec: { environment: { name: 'nodejs' }, package: { packageref: { name: 'p' } }, streaming: { protocol: 'sse', idleTimeoutSeconds: 30, maxDurationSeconds: 60 } } };
    answer = (s) => (s.method === 'GET' ? { status: 200, body: structuredClone(current) } : { status: 200, body: s.body });
    const put = () => seen.find((s) => s.method === 'PUT')!.body;
    seen = [];
    const one = await run(['fn', 'update', '--name', 'feed', '--streaming-idle-timeout', '0']);
    assert.equal(one.code, 0, one.err);
    assert.deepEqual(put().spec.streaming, { protocol: 'sse', maxDurationSeconds: 60 });
    seen = [];
    current.spec.streaming = { idleTimeoutSeconds: 30 } as typeof current.spec.streaming;
    const all = await run(['fn', 'update', '--name', 'feed', '--streaming-idle-timeout', '0', '--streaming-max-duration', '0']);
    assert.equal(all.code, 0, all.err);
    assert.equal('streaming' in put().spec, false);
    answer = (s) => ({ status: s.method === 'POST' ? 201 : 200, body: s.body ?? {} });
  });

  it("mqt update adds metadata keys, takes away those given as 'key=', and '--secret -' removes the secret", async () => {
    const current = { kind: 'MessageQueueTrigger', metadata: { name: 'orders', namespace: 'default' }, spec: { functionref: { type: 'name', name: 'f' }, messageQueueType: 'kafka', topic: 'in', metadata: { consumerGroup: 'g', lagThreshold: '5' }, secret: 'creds' } };
    answer = (s) => (s.method === 'GET' ? { status: 200, body: structuredClone(current) } : { status: 200, body: s.body });
    seen = [];
    const r = await run(['mqt', 'update', '--name', 'orders', '--metadata', 'lagThreshold=', '--metadata', 'bootstrapServers=k:9092', '--secret', '-', '--mqtkind', 'keda', '--pollinginterval', '15', '--cooldownperiod', '0', '--minreplicacount', '1', '--maxreplicacount', '4']);
    assert.equal(r.code, 0, r.err);
    const spec = seen.find((s) => s.method === 'PUT')!.body.spec;
    assert.deepEqual([spec.mqtkind, spec.pollingInterval, spec.cooldownPeriod, spec.minReplicaCount, spec.maxReplicaCount], ['keda', 15, 0, 1, 4]);
    assert.deepEqual(spec.metadata, { consumerGroup: 'g', bootstrapServers: 'k:9092' });
    assert.equal('secret' in spec, false);
    seen = [];
    assert.equal((await run(['mqt', 'update', '--name', 'orders', '--metadata', 'consumerGroup=', '--metadata', 'lagThreshold='])).code, 0);
    assert.equal('metadata' in seen.find((s) => s.method === 'PUT')!.body.spec, false, 'no key left: no metadata');
    const bad = await run(['mqt', 'update', '--name', 'orders', '--secret', 'Bad_Name']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /--secret 'Bad_Name' is not a valid name/);
    answer = (s) => ({ status: s.method === 'POST' ? 201 : 200, body: s.body ?? {} });
  });

  it('mqt create warns on stderr when the server has no broker of its type, and still succeeds', async () => {
    const info = { mode: 'local', routerUrl: 'http://127.0.0.1:1', authentication: { enabled: false, authUriPath: '/auth/login' }, messageQueueTypes: ['kafka'] };
    answer = (s) => (s.url === '/v1/info' ? { status: 200, body: info } : { status: 201, body: s.body });
    const r = await run(['mqt', 'create', '--name', 'q', '--function', 'f', '--mqtype', 'rabbitmq', '--topic', 'in']);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, "trigger 'q' created\n");
    assert.match(r.err, /^Warning: this server has no rabbitmq broker: set rabbitmq\.enabled=true and rabbitmq\.url, or the trigger's metadata host; the trigger is stored and starts consuming once one is configured$/m);
    for (const quiet of [
      ['--mqtype', 'kafka'],
      ['--mqtype', 'rabbitmq', '--metadata', 'host=amqp://mq.example/'],
    ]) {
      const q = await run(['mqt', 'create', '--name', 'q', '--function', 'f', '--topic', 'in', ...quiet]);
      assert.equal(q.err, '', `${quiet.join(' ')}: its broker is configured, or it names its own`);
    }
    answer = (s) => ({ status: s.method === 'POST' ? 201 : 200, body: s.body ?? {} });
  });

  it('mqt list shows the content type and what the trigger manager says of each trigger', async () => {
    const t = (name: string, status?: object) => ({
      kind: 'MessageQueueTrigger',
      metadata: { name, namespace: 'default' },
      spec: { functionref: { type: 'name', name: 'f' }, messageQueueType: 'redis', topic: 'in', contentType: name === 'a' ? 'text/plain' : undefined },
      status,
    });
    const items = [
      t('a', { state: 'consuming' }),
      t('b', { state: 'waiting', message: 'no redis broker: set redis.enabled=true' }),
      t('c', { state: 'error', message: 'Socket closed\nunexpectedly', lastError: 'Socket closed unexpectedly' }),
      t('d', {}),
    ];
    answer = () => ({ status: 200, body: { items, resourceVersion: '1' } });
    const r = await run(['mqt', 'list']);
    assert.equal(r.code, 0, r.err);
    const lines = r.out.trimEnd().split('\n');
    assert.match(lines[0], /^NAME +FUNCTION_NAME +MESSAGE_QUEUE_TYPE +TOPIC +RESPONSE_TOPIC +ERROR_TOPIC +MAX_RETRIES +PUB_MSG_CONTENT_TYPE +STATUS$/);
    assert.match(lines[1], /^a .* text\/plain +consuming$/);
    assert.match(lines[2], /^b .* application\/json +waiting: no redis broker: set redis\.enabled=true$/);
    assert.match(lines[3], /^c .* error: Socket closed unexpectedly$/, 'on one line');
    assert.match(lines[4], /^d .* pending$/, 'not picked up yet');
    const json = await run(['mqt', 'list', '-o', 'json']);
    assert.deepEqual(JSON.parse(json.out).map((x: { status: object }) => x.status), items.map((x) => x.status));
    answer = (s) => ({ status: s.method === 'POST' ? 201 : 200, body: s.body ?? {} });
  });

  it('route create defaults to GET and a UUID name, with the warning', async () => {
    seen = [];
    const r = await run(['route', 'create', '--function', 'hello', '--url', 'hello']);
    assert.equal(r.code, 0, r.err);
    const body = seen[0].body;
    assert.match(body.metadata.name, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual(body.spec.methods, ['GET']);
    assert.equal(body.spec.relativeurl, '/hello');
    assert.match(r.out, /^Warning: --name will be soon marked as required flag/m);
    assert.match(r.out, new RegExp(`^trigger '${body.metadata.name}' created$`, 'm'));
  });

  it('prints server warnings and errors as one line with the registry exit code', async () => {
    answer = () => ({ status: 201, body: {}, headers: { 'x-flint-warnings': JSON.stringify(["function 'x' does not exist yet"]) } });
    const w = await run(['route', 'create', '--name', 'r', '--function', 'x', '--url', '/x']);
    assert.match(w.out, /^Warning: function 'x' does not exist yet$/m);
    answer = () => ({ status: 409, body: { code: 'FLINT_ERR_ALREADY_EXISTS', message: "Environment 'nodejs' already exists" } });
    const dup = await run(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    assert.equal(dup.code, 5);
    assert.equal(dup.err, "Error: Environment 'nodejs' already exists\n");
    answer = (s) => ({ status: s.method === 'POST' ? 201 : 200, body: s.body ?? {} });
  });

  it('refuses bad flags before calling the server', async () => {
    seen = [];
    const cases: Array<[string[], RegExp]> = [
      [['env', 'create', '--name', 'Bad_Name', '--image', 'x'], /--name 'Bad_Name' is not a valid name/],
      [['env', 'create', '--image', 'x'], /required option '--name <name>' not specified/],
      [['env', 'create', '--name', 'a', '--image', 'x', '--bogus'], /unknown option '--bogus'/],
      [['env', 'create', '--name', 'a', '--image', 'x', '--poolsize', 'three'], /--poolsize must be a whole number/],
      [['fn', 'create', '--name', 'f', '--env', 'e'], /need --code <file>, --src, --deploy or --pkg <package>/],
      [['fn', 'create', '--name', 'f', '--env', 'e', '--code', 'missing.js'], /cannot read 'missing.js'/],
      [['fn', 'create', '--name', 'f', '--env', 'e', '--code', 'hello.js', '--minscale', '2'], /--executortype newdeploy/],
      [['fn', 'create', '--name', 'f', '--env', 'e', '--code', 'hello.js', '--streaming-protocol', 'grpc'], /--streaming-protocol must be one of auto, sse, chunked, websocket, got 'grpc'/],
      [['fn', 'create', '--name', 'f', '--env', 'e', '--code', 'hello.js', '--streaming-idle-timeout', '-1'], /--streaming-idle-timeout must be between 0 and 86400/],
      [['fn', 'create', '--name', 'f', '--env', 'e', '--code', 'hello.js', '--streaming-max-duration', '604801'], /--streaming-max-duration must be between 0 and 604800/],
      [['fn', 'create', '--name', 'f', '--env', 'e', '--code', 'hello.js', '--streaming-max-duration', '1.5'], /--streaming-max-duration must be a whole number/],
      [['route', 'create', '--name', 'r', '--url', '/x'], /need a function name/],
      [['route', 'create', '--name', 'r', '--function', 'f'], /either --prefix or --url/],
      [['route', 'create', '--name', 'r', '--function', 'f', '--url', '/'], /only root path/],
      [['route', 'create', '--name', 'r', '--function', 'f', '--url', '/x', '--method', 'FETCH'], /unsupported HTTP method 'FETCH'/],
      [['route', 'create', '--name', 'r', '--function', 'f', '--url', '/x', '--ingressrule', 'novalue'], /--ingressrule 'novalue' is not host=path/],
      [['route', 'create', '--name', 'r', '--function', 'f', '--url', '/x', '--ingressrule', 'a=b=c'], /more than one '='/],
      [['route', 'create', '--name', 'r', '--function', 'f', '--url', '/x', '--ingressrule', '=/x'], /the host is empty/],
      [['mqt', 'create', '--name', 'q', '--function', 'f', '--topic', 'in', '--resptopic', 'in'], /--resptopic must differ/],
      [['mqt', 'create', '--name', 'q', '--function', 'f', '--topic', 'bad topic'], /not a valid topic name/],
      [['mqt', 'create', '--name', 'q', '--function', 'f', '--topic', 'in', '--maxretries', '-1'], /--maxretries must be between 0/],
      [['mqt', 'create', '--name', 'q', '--function', 'f', '--topic', 'in', '--mqtype', 'sqs'], /--mqtype must be one of/],
      [['mqt', 'create', '--name', 'q', '--function', 'f', '--topic', 'in', '--mqtkind', 'classic'], /--mqtkind must be keda or fission, got 'classic'/],
      [['mqt', 'create', '--name', 'q', '--function', 'f', '--topic', 'in', '--pollinginterval', '0'], /--pollinginterval must be between 1 and 2147483647/],
      [['nothing'], /unknown command 'nothing'/],
    ];
    for (const [args, pattern] of cases) {
      const r = await run(args);
      assert.notEqual(r.code, 0, args.join(' '));
      assert.match(r.err, /^Error: /, args.join(' '));
      assert.equal(r.err.trim().split('\n').length, 1, `one line: ${r.err}`);
      assert.match(r.err, pattern, args.join(' '));
    }
    assert.deepEqual(seen, [], 'nothing reached the server');
  });

  it('says clearly when the control plane is unreachable', async () => {
    const r = await run(['env', 'list'], { FLINT_URL: 'http://127.0.0.1:1' });
    assert.equal(r.code, 6);
    assert.match(r.err, /^Error: cannot reach the Flint control plane at http:\/\/127\.0\.0\.1:1: .*is 'flint server' running\? set FLINT_URL/);
  });
});
