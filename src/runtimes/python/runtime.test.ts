// The Python runtime through real workers (sandboxed where bubblewrap works),
// and its builder on a real requirements.txt.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { startWorker, type WorkerHandle } from '../../executor/process/worker-process.ts';
import { freePort } from '../../ingress/free-port.ts';
import { sandboxAvailable } from '../../sandbox/bwrap.ts';
import { pythonLaunch } from './launch.ts';

let root: string;
let sandbox: 'bubblewrap' | 'none';
const workers: WorkerHandle[] = [];
let seq = 0;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-py-'));
  sandbox = (await sandboxAvailable()) ? 'bubblewrap' : 'none';
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

async function start() {
  const lines: string[] = [];
  const id = `py${++seq}-${process.pid}`;
  const w = await startWorker({ id, runtime: 'python', instanceDir: path.join(root, id), sandbox, allowNetwork: false, memoryMB: 128, onOutput: (l) => lines.push(l) });
  workers.push(w);
  return { w, lines };
}

/** Code as a directory (an unpacked package) or a single file at userfunc/deployarchive. */
async function deploy(w: WorkerHandle, code: string | Record<string, string>, functionName?: string) {
  const target = path.join(w.hostDirs.userfunc, 'deployarchive');
  if (typeof code === 'string') fs.writeFileSync(target, code);
  else for (const [name, text] of Object.entries(code)) {
    fs.mkdirSync(path.dirname(path.join(target, name)), { recursive: true });
    fs.writeFileSync(path.join(target, name), text);
  }
  await w.specialize({ filepath: path.posix.join(w.sandboxDirs.userfunc, 'deployarchive'), functionName }, 10_000);
}

function call(w: WorkerHandle, method: string, url: string, body?: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
    const req = http.request({ socketPath: w.socketPath, method, path: url, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('python runtime', () => {
  it('serves module.func of a package directory, with the request object', async () => {
    const { w } = await start();
    await deploy(w, {
      'main.py': 'from lib import helper\n\ndef handle(request):\n    return {"method": request.method, "path": request.path, "q": request.query, "json": request.json(), "h": request.headers.get("X-Test"), "helper": helper()}\n',
      'lib.py': 'def helper():\n    return "from lib"\n',
    }, 'main.handle');
    const r = await call(w, 'POST', '/items/1?a=1&a=2&b=x', '{"k": [1]}', { 'content-type': 'application/json', 'x-test': 'yes' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(r.text), { method: 'POST', path: '/items/1', q: { a: ['1', '2'], b: 'x' }, json: { k: [1] }, h: 'yes', helper: 'from lib' });
  });

  it('serves a single file: main by default, flint.request for zero-argument handlers', async () => {
    const { w } = await start();
    await deploy(w, 'import flint\n\ndef main():\n    return "hello " + flint.request.args.get("name", "world")\n');
    const r = await call(w, 'GET', '/?name=py');
    assert.equal(r.status, 200);
    assert.equal(r.text, 'hello py');
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
  });

  it('takes every return shape: tuples, headers, Response, bytes, async, generators', async () => {
    const { w } = await start();
    await deploy(w, {
      'fn.py': [
        'import flint',
        'def main(request):',
        '    kind = request.query.get("kind")',
        '    if kind == "tuple2": return "created", 201',
        '    if kind == "tuple3": return "teapot", 418, {"X-Kind": "tuple3"}',
        '    if kind == "headers": return "with headers", {"X-Kind": "headers"}',
        '    if kind == "response": return flint.Response(b"raw", status=202, headers={"Content-Type": "text/x-raw"})',
        '    if kind == "bytes": return b"\\x00\\x01"',
        '    if kind == "stream": return (str(i) for i in range(3))',
        '    if kind == "none": return None',
        '    raise ValueError("boom: " + str(kind))',
        'async def later(request):',
        '    return {"async": True}',
      ].join('\n'),
    }, 'fn.main');
    const q = (kind: string) => call(w, 'GET', `/?kind=${kind}`);
    assert.deepEqual([(await q('tuple2')).status, (await q('tuple2')).text], [201, 'created']);
    const t3 = await q('tuple3');
    assert.deepEqual([t3.status, t3.text, t3.headers['x-kind']], [418, 'teapot', 'tuple3']);
    assert.equal((await q('headers')).headers['x-kind'], 'headers');
    const resp = await q('response');
    assert.deepEqual([resp.status, resp.text, resp.headers['content-type']], [202, 'raw', 'text/x-raw']);
    assert.equal((await q('bytes')).headers['content-type'], 'application/octet-stream');
    const s = await q('stream');
    assert.equal(s.text, '012');
    assert.equal(s.headers['transfer-encoding'], 'chunked');
    for (const kind of ['none', 'raise']) {
      const r = await q(kind);
      assert.equal(r.status, 500);
      assert.deepEqual(JSON.parse(r.text), { error: 'Internal server error' });
    }
  });

  it('runs async handlers', async () => {
    const { w } = await start();
    await deploy(w, 'async def main(request):\n    return {"async": True}\n');
    assert.equal((await call(w, 'GET', '/')).text, '{"async": true}');
  });

  it('puts a handler error with its traceback in the log, and refuses a second specialization', async () => {
    const { w, lines } = await start();
    await deploy(w, 'def main(request):\n    raise KeyError("the-missing-key")\n');
    assert.equal((await call(w, 'GET', '/')).status, 500);
    // The traceback's last line: its source line, which names the key too, comes first and can arrive alone.
    for (let i = 0; i < 100 && !lines.some((l) => l.includes("KeyError: 'the-missing-key'")); i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(lines.some((l) => l.startsWith('Traceback')), lines.join('\n'));
    assert.ok(lines.some((l) => l.includes("KeyError: 'the-missing-key'")), lines.join('\n'));
    await assert.rejects(w.specialize({ filepath: '/userfunc/deployarchive' }, 5000), /Not a generic container/);
  });

  it("marks what a request prints with the router's request id, whole lines only, and ignores an id that is not one", async () => {
    const { w, lines } = await start();
    await deploy(w, 'import sys\n\ndef main(request):\n    print("hello from", request.args.get("n"))\n    sys.stdout.write("half a line")\n    if request.args.get("n") == "2":\n        raise ValueError("the-bad-value")\n    return "ok"\n');
    assert.equal((await call(w, 'GET', '/?n=1', undefined, { 'x-flint-request-id': 'py-req-1' })).status, 200);
    assert.equal((await call(w, 'GET', '/?n=2', undefined, { 'x-flint-request-id': 'py-req-2' })).status, 500);
    assert.equal((await call(w, 'GET', '/?n=3', undefined, { 'x-flint-request-id': 'x'.repeat(193) })).status, 200);
    for (let i = 0; i < 100 && !lines.some((l) => l.includes('hello from 3')); i++) await new Promise((r) => setTimeout(r, 20));
    const mine = (id: string) => lines.filter((l) => l.startsWith(`\x1e${id}\x1e`)).map((l) => l.slice(id.length + 2));
    assert.deepEqual(mine('py-req-1'), ['hello from 1', 'half a line'], lines.join('\n'));
    assert.ok(mine('py-req-2').includes("ValueError: the-bad-value"), lines.join('\n'));
    assert.ok(mine('py-req-2')[0].startsWith('hello from 2'));
    assert.ok(lines.includes('hello from 3'), lines.join('\n'));
  });

  it('reports a syntax error, a missing function and a missing path at specialization', async () => {
    const a = await start();
    await assert.rejects(deploy(a.w, 'def main(:\n'), (e: any) => e.code === 'FLINT_ERR_SPECIALIZE_FAILED' && /SyntaxError/.test(e.message));
    const b = await start();
    await assert.rejects(deploy(b.w, { 'm.py': 'x = 1\n' }, 'm.nothere'), /function 'nothere' not found/);
    const c = await start();
    await assert.rejects(c.w.specialize({ filepath: '/userfunc/nothing' }, 5000), /not found/);
  });

  it('answers 500 before specialization and 413 for an oversized body', async () => {
    const { w } = await start();
    const r = await call(w, 'GET', '/');
    assert.equal(r.status, 500);
    assert.match(r.text, /Generic container: no requests supported/);
    await deploy(w, 'def main(request):\n    return str(len(request.body))\n');
    // Refused on the declared length, before any of the body is read.
    const reply = await new Promise<string>((resolve, reject) => {
      const sock = net.connect(w.socketPath, () => sock.write('POST / HTTP/1.1\r\nHost: w\r\nContent-Length: 60000000\r\n\r\n'));
      let text = '';
      sock.on('data', (c) => (text += c));
      sock.on('end', () => resolve(text));
      sock.on('error', reject);
    });
    assert.match(reply, /^HTTP\/1\.1 413 /);
    assert.match(reply, /request body larger than 52428800 bytes/);
  });
});

describe('python runtime on TCP', () => {
  // Where pods share one network (the node agent's loopback addresses, chart.listenOnPodIP), each worker must listen
  // on its own address, not take the port on all of them.
  async function listenAt(args: string[], env: Record<string, string>): Promise<{ answers(host: string): Promise<boolean>; stop(): void }> {
    const port = await freePort();
    const child = spawn('python3', ['-u', '-B', path.join(import.meta.dirname, 'server.py'), '--port', String(port), ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'ignore' });
    const answers = (host: string) =>
      new Promise<boolean>((resolve) => {
        const req = http.get({ host, port, path: '/healthz', timeout: 1000 }, (res) => {
          res.resume();
          resolve(res.statusCode === 200);
        });
        req.on('error', () => resolve(false));
        req.on('timeout', () => req.destroy());
      });
    const host = args.includes('--host') ? args[args.indexOf('--host') + 1] : (env.FLINT_HOST ?? '127.0.0.1');
    for (let i = 0; i < 100 && !(await answers(host)); i++) await new Promise((r) => setTimeout(r, 50));
    return { answers, stop: () => child.kill('SIGKILL') };
  }

  it('listens on FLINT_HOST, or --host, and only there', async () => {
    const fromEnv = await listenAt([], { FLINT_HOST: '127.0.0.2' });
    try {
      assert.equal(await fromEnv.answers('127.0.0.2'), true);
      assert.equal(await fromEnv.answers('127.0.0.1'), false, 'not on every address');
    } finally {
      fromEnv.stop();
    }
    const fromFlag = await listenAt(['--host', '127.0.0.3'], { FLINT_HOST: '127.0.0.2' });
    try {
      assert.equal(await fromFlag.answers('127.0.0.3'), true, 'the flag over the environment');
      assert.equal(await fromFlag.answers('127.0.0.2'), false);
    } finally {
      fromFlag.stop();
    }
    const everywhere = await listenAt([], {});
    try {
      assert.equal(await everywhere.answers('127.0.0.1'), true);
      assert.equal(await everywhere.answers('127.0.0.4'), true, 'all addresses by default, as in a pod of its own');
    } finally {
      everywhere.stop();
    }
  });
});

describe('python builder', () => {
  it('installs requirements.txt into the package, and the function imports it', async () => {
    const src = path.join(root, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'requirements.txt'), 'pyyaml\n');
    fs.writeFileSync(path.join(src, 'main.py'), 'import yaml\n\ndef main(request):\n    return yaml.safe_dump(yaml.safe_load(request.body), default_flow_style=True).strip()\n');
    const deployDir = path.join(root, 'deploy');
    const builder = pythonLaunch.builder;
    assert.ok(builder);
    const r = spawnSync(path.join(builder.dir, 'build'), [], {
      cwd: src,
      env: { ...process.env, ...builder.env?.(), SRC_PKG: src, DEPLOY_PKG: deployDir, FLINT_BUILD_CACHE: path.join(root, 'cache'), HOME: root },
      encoding: 'utf8',
      timeout: 180_000,
    });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.ok(fs.existsSync(path.join(deployDir, 'yaml')), 'pyyaml is in the package');
    const { w } = await start();
    fs.cpSync(deployDir, path.join(w.hostDirs.userfunc, 'deployarchive'), { recursive: true });
    await w.specialize({ filepath: path.posix.join(w.sandboxDirs.userfunc, 'deployarchive'), functionName: 'main.main' }, 10_000);
    const out = await call(w, 'POST', '/', 'a: [1, 2]');
    assert.equal(out.text, '{a: [1, 2]}');
  });
});
