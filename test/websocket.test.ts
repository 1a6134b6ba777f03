// WebSocket functions end to end: a real `flint server`, the real CLI, the
// Node.js runtime in its sandbox, and Node's own WebSocket client talking to
// it through the router and through the builtin ingress gateway.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, flint, startServer, type TestServer } from './helpers/server.ts';

/** Node's WebSocket client with what it received kept for the test to wait on. */
class Client {
  readonly ws: WebSocket;
  readonly messages: string[] = [];
  closed: { code: number; reason: string } | undefined;

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.addEventListener('message', (e) => this.messages.push(String(e.data)));
    ws.addEventListener('close', (e) => {
      this.closed = { code: e.code, reason: e.reason };
    });
  }

  static open(url: string, protocols?: string[]): Promise<Client> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, protocols);
      const client = new Client(ws);
      ws.addEventListener('open', () => resolve(client), { once: true });
      ws.addEventListener('error', () => reject(new Error(`could not open ${url}`)), { once: true });
    });
  }

  /** Waits for a message equal to `text` (or matching it). */
  async receive(text: string | RegExp): Promise<string> {
    const hit = (m: string) => (typeof text === 'string' ? m === text : text.test(m));
    return eventually(() => this.messages.find(hit), `message ${String(text)} (got ${JSON.stringify(this.messages)})`);
  }

  async closedWith(): Promise<{ code: number; reason: string }> {
    return eventually(() => this.closed, 'the close');
  }
}

const toWs = (httpUrl: string) => httpUrl.replace(/^http/, 'ws');

const CHAT = `module.exports = function (ws, clients, request) {
  ws.send('hello ' + request.url + ' ' + (request.headers['x-flint-function-name'] || '?') + ' ' + (ws.protocol || '-'));
  ws.on('message', (data) => {
    for (const c of clients) c.send(VERSION + clients.size + ':' + data.toString());
  });
};
`;

describe('WebSocket functions through flint server', () => {
  let server: TestServer;
  let work: string;
  let ingressUrl: string;

  const ok = (args: string[]) => {
    const r = flint(server, args, { cwd: work });
    assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
  };
  const writeCode = (name: string, text: string) => {
    const file = path.join(work, name);
    fs.writeFileSync(file, text);
    return file;
  };

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-ws-sys-'));
    server = await startServer({ sets: ['ingress.provider=builtin'] });
    const found = /^ingress listening on (\S+)$/m.exec(server.output())?.[1];
    assert.ok(found, `flint server printed no ingress URL:\n${server.output()}`);
    ingressUrl = found;
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
    // Every open WebSocket holds one of its instance's request slots: with the default of one, each client would get an instance of its own.
    ok(['fn', 'create', '--name', 'chat', '--env', 'nodejs', '--rpp', '10', '--code', writeCode('chat.js', `const VERSION = '';\n${CHAT}`)]);
    ok(['route', 'create', '--name', 'chat', '--url', '/chat', '--function', 'chat', '--createingress']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('serves a WebSocket function through the router: greeting, broadcast to every client, close', async () => {
    const url = `${toWs(server.routerUrl)}/chat?room=1`;
    const a = await eventually(() => Client.open(url, ['chat.v1', 'chat.v2']).catch(() => undefined), 'the route');
    await a.receive('hello /chat?room=1 chat chat.v1');
    assert.equal(a.ws.protocol, 'chat.v1', 'the first offered subprotocol is selected');
    const b = await Client.open(url);
    a.ws.send('hi');
    await a.receive('2:hi');
    await b.receive('2:hi');
    a.ws.close(1000, 'bye');
    assert.equal((await a.closedWith()).code, 1000);
    b.ws.send('alone');
    await b.receive('1:alone');
    b.ws.close();
    await b.closedWith();
  });

  it('serves it through the ingress gateway too', async () => {
    const c = await eventually(() => Client.open(`${toWs(ingressUrl)}/chat`).catch(() => undefined), 'the route at the gateway');
    await c.receive('hello /chat chat -');
    c.ws.send('via ingress');
    // The count may still include a client of the last test whose close the instance has not seen yet.
    await c.receive(/^\d+:via ingress$/);
    c.ws.close();
    await c.closedWith();
  });

  it('keeps an open connection on the old code through fn update while new ones get the new code', async () => {
    const old = await Client.open(`${toWs(server.routerUrl)}/chat`);
    await old.receive('hello /chat chat -');
    ok(['fn', 'update', '--name', 'chat', '--code', writeCode('chat2.js', `const VERSION = 'v2 ';\n${CHAT}`)]);
    const fresh = await eventually(async () => {
      const c = await Client.open(`${toWs(server.routerUrl)}/chat`);
      c.ws.send('which');
      // Each instance counts only its own clients; the new one has just this one.
      await eventually(() => c.messages.some((m) => m.endsWith(':which')), 'an answer');
      if (c.messages.includes('v2 1:which')) return c;
      c.ws.close();
      return undefined;
    }, 'a connection to the new code');
    old.ws.send('still here');
    await old.receive(/^\d+:still here$/);
    assert.equal(old.closed, undefined);
    old.ws.close();
    fresh.ws.close();
    await old.closedWith();
    await fresh.closedWith();
  });

  it('closes an old connection with 1001 some seconds after an update, once it is all its instance holds', async () => {
    ok(['fn', 'create', '--name', 'brief', '--env', 'nodejs', '--rpp', '10', '--code', writeCode('brief.js', `const VERSION = '';\n${CHAT}`)]);
    ok(['route', 'create', '--name', 'brief', '--url', '/brief', '--function', 'brief']);
    const old = await eventually(() => Client.open(`${toWs(server.routerUrl)}/brief`).catch(() => undefined), 'the brief route');
    await old.receive('hello /brief brief -');
    ok(['fn', 'update', '--name', 'brief', '--code', writeCode('brief2.js', `const VERSION = 'v2 ';\n${CHAT}`)]);
    assert.equal((await old.closedWith()).code, 1001);
    const fresh = await Client.open(`${toWs(server.routerUrl)}/brief`);
    fresh.ws.send('x');
    await fresh.receive('v2 1:x');
    fresh.ws.close();
    await fresh.closedWith();
  });

  it('closes with 1011 when the function throws, and the error is in fn log', async () => {
    ok(['fn', 'create', '--name', 'bad', '--env', 'nodejs', '--code', writeCode('bad.js', "module.exports = () => { throw new Error('websocket boom'); };")]);
    ok(['route', 'create', '--name', 'bad', '--url', '/bad', '--function', 'bad']);
    const c = await eventually(() => Client.open(`${toWs(server.routerUrl)}/bad`).catch(() => undefined), 'the bad route');
    assert.equal((await c.closedWith()).code, 1011);
    await eventually(() => /websocket boom/.test(flint(server, ['fn', 'log', '--name', 'bad']).stdout), 'the error in fn log');
  });

  it('closes a WebSocket silent for the streaming idle limit set with fn create, and keeps its instance', async () => {
    const quiet = `const VERSION = '';\n${CHAT.replace("ws.on('message'", "ws.on('close', (code, reason) => console.log('left: ' + code + ' ' + reason));\n  ws.on('message'")}`;
    ok(['fn', 'create', '--name', 'quiet', '--env', 'nodejs', '--rpp', '10', '--streaming-idle-timeout', '1', '--code', writeCode('quiet.js', quiet)]);
    ok(['route', 'create', '--name', 'quiet', '--url', '/quiet', '--function', 'quiet']);
    const c = await eventually(() => Client.open(`${toWs(server.routerUrl)}/quiet`).catch(() => undefined), 'the quiet route');
    await c.receive('hello /quiet quiet -');
    // The router closes it with a close frame of its own: 1001, going away, as API gateways close idle WebSockets.
    assert.deepEqual(await c.closedWith(), { code: 1001, reason: 'idle timeout' });
    const next = await Client.open(`${toWs(server.routerUrl)}/quiet`);
    next.ws.send('again');
    await next.receive(/^\d+:again$/);
    next.ws.close();
    await next.closedWith();
    const log = await eventually(() => {
      const text = flint(server, ['fn', 'log', '--name', 'quiet']).stdout;
      return text.includes('left: 1001 idle timeout') ? text : undefined;
    }, "the function's side of the close (1001) in fn log");
    assert.equal((log.match(/specialized/g) ?? []).length, 1, `one instance served both:\n${log}`);
    assert.doesNotMatch(log, /stopped|exceeded/);
  });

  it('closes open WebSockets with 1001 when the server stops, through the router and through the ingress gateway, not with a cut', async () => {
    const own = await startServer({ sets: ['ingress.provider=builtin'] });
    try {
      const run = (args: string[]) => {
        const r = flint(own, args, { cwd: work });
        assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
      };
      const gateway = /^ingress listening on (\S+)$/m.exec(own.output())?.[1];
      assert.ok(gateway, `the second server printed no ingress URL:\n${own.output()}`);
      run(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
      run(['fn', 'create', '--name', 'chat', '--env', 'nodejs', '--rpp', '10', '--code', path.join(work, 'chat.js')]);
      run(['route', 'create', '--name', 'chat', '--url', '/chat', '--function', 'chat', '--createingress']);
      const direct = await eventually(() => Client.open(`${toWs(own.routerUrl)}/chat`).catch(() => undefined), 'the route on the second server');
      await direct.receive('hello /chat chat -');
      const viaIngress = await eventually(() => Client.open(`${toWs(gateway)}/chat`).catch(() => undefined), 'the route at the second gateway');
      await viaIngress.receive('hello /chat chat -');
      await own.stop();
      assert.equal((await direct.closedWith()).code, 1001);
      assert.equal((await viaIngress.closedWith()).code, 1001);
    } finally {
      await own.stop();
    }
  });

  it("passes on the runtime's refusal of a bad handshake, then closes the connection", async () => {
    const u = new URL(server.routerUrl);
    const socket = net.connect(Number(u.port), u.hostname);
    socket.write('GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n\r\n');
    let text = '';
    socket.on('data', (c: Buffer) => {
      text += c.toString('latin1');
    });
    await once(socket, 'close');
    assert.match(text, /^HTTP\/1\.1 400 /);
    assert.match(text, /\r\nX-Flint-Request-Id: /i);
    assert.match(text.slice(text.indexOf('\r\n\r\n')), /Sec-WebSocket-Key/);
  });
});
