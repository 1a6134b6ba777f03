// The server over real sockets: bytes in, bytes out, as a client sees them.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FlintError } from '../../api/errors.ts';
import type { Http1Request } from './request.ts';
import { HeaderLines, type Http1Response } from './response.ts';
import { listenersOn } from '../../testing/listeners.ts';
import { Http1Server } from './server.ts';

type Handler = (req: Http1Request, res: Http1Response) => void;

let handler: Handler = () => {};
const failures: unknown[] = [];
// Four sockets in a SO_REUSEPORT group, so every test here runs through the group (limits/listener-group.ts).
const server = new Http1Server({
  keepAliveTimeoutMs: 65_000,
  headersTimeoutMs: 66_000,
  acceptSockets: 4,
  handle: (req, res) => handler(req, res),
  refuse(res: Http1Response, err: FlintError) {
    const body = JSON.stringify({ code: err.code, message: err.message });
    res.writeHead(err.code === 'FLINT_ERR_HEADERS_TOO_LARGE' ? 431 : err.code === 'FLINT_ERR_NOT_IMPLEMENTED' ? 501 : 400, ['Content-Type', 'application/json', 'Content-Length', String(body.length)]);
    res.end(body);
  },
  handlerFailed: (err) => failures.push(err),
});
let port = 0;

/** Sends `text` on a fresh connection and reads until the server closes it or `until` matches. */
async function exchange(text: string | string[], until?: (got: string) => boolean): Promise<{ got: string; closed: boolean }> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let got = '';
  let closed = false;
  const done = new Promise<void>((resolve) => {
    socket.on('data', (d) => {
      got += d.toString('latin1');
      if (until?.(got)) resolve();
    });
    socket.on('close', () => {
      closed = true;
      resolve();
    });
    socket.on('error', () => {});
  });
  for (const part of Array.isArray(text) ? text : [text]) {
    socket.write(part);
    await new Promise((r) => setTimeout(r, 5));
  }
  await done;
  socket.destroy();
  return { got, closed };
}

const count = (s: string, re: RegExp) => (s.match(re) ?? []).length;

function hello(req: Http1Request, res: Http1Response): void {
  const body = `hello ${req.url}`;
  res.writeHead(200, ['Content-Type', 'text/plain', 'Content-Length', String(body.length)]);
  res.end(body);
}

describe('Http1Server', () => {
  before(async () => {
    port = (await server.listen(0, '127.0.0.1')).port;
  });
  after(async () => {
    await server.close(1000);
    assert.deepEqual(failures, []);
    assert.equal(listenersOn(port), 0, 'every socket of the group closed');
  });

  it('listens on its group of sockets, all on one port', { skip: process.platform !== 'linux' && 'Linux only' }, () => {
    assert.equal(listenersOn(port), 4);
  });

  it('keeps a connection alive and answers pipelined requests in order', async () => {
    let n = 0;
    handler = (req, res) => {
      // The first answer comes last: the second must still wait its turn.
      if (n++ === 0) setTimeout(() => hello(req, res), 30);
      else hello(req, res);
    };
    const { got, closed } = await exchange('GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n', (g) => g.includes('hello /2'));
    assert.equal(closed, false);
    assert.ok(got.indexOf('hello /1') < got.indexOf('hello /2'), got);
    assert.equal(count(got, /HTTP\/1\.1 200 OK\r\n/g), 2);
    assert.match(got, /\r\nKeep-Alive: timeout=65\r\n/);
    assert.match(got, /\r\nDate: .+ GMT\r\n/);
  });

  it('decodes a chunked request body, and chunks a response without a length', async () => {
    handler = (req, res) => {
      const parts: Buffer[] = [];
      req.body?.on('data', (c: Buffer) => parts.push(c));
      req.body?.on('end', () => {
        res.writeHead(200, ['Content-Type', 'text/plain']);
        res.write(Buffer.concat(parts));
        res.end('!');
      });
    };
    const { got } = await exchange(['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n', '2\r\nde\r\n0\r\n\r\n'], (g) => g.endsWith('0\r\n\r\n'));
    assert.match(got, /Transfer-Encoding: chunked\r\n/);
    assert.ok(got.endsWith('\r\n\r\n5\r\nabcde\r\n1\r\n!\r\n0\r\n\r\n'), got);
  });

  it('answers HTTP/1.0 with a body that ends at the close, and HEAD without a body', async () => {
    handler = (_req, res) => {
      res.writeHead(200, ['Content-Type', 'text/plain']);
      res.end('old');
    };
    const old = await exchange('GET / HTTP/1.0\r\n\r\n');
    assert.ok(old.closed);
    assert.match(old.got, /Connection: close\r\n\r\nold$/);
    handler = hello;
    const head = await exchange('HEAD /x HTTP/1.1\r\nHost: h\r\n\r\nGET /y HTTP/1.1\r\nHost: h\r\n\r\n', (g) => g.includes('hello /y'));
    assert.match(head.got, /Content-Length: 8\r\n/, 'HEAD keeps the length it would have had');
    assert.ok(!head.got.includes('hello /x'));
  });

  it('sends 100 Continue before reading a body the client waits to send', async () => {
    handler = (req, res) => {
      req.body?.resume();
      req.body?.on('end', () => hello(req, res));
    };
    const { got } = await exchange(['POST /c HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n', 'ok'], (g) => g.includes('hello /c'));
    assert.ok(got.startsWith('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n'), got);
  });

  it('drops the rest of a body it answered before reading, and serves the next request', async () => {
    handler = hello;
    const { got, closed } = await exchange(
      ['POST /early HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n12345', '67890GET /next HTTP/1.1\r\nHost: h\r\n\r\n'],
      (g) => g.includes('hello /next'),
    );
    assert.equal(closed, false);
    assert.match(got, /hello \/early/);
  });

  it('refuses a malformed request with a JSON error and closes the connection', async () => {
    const cases: [string, number, RegExp][] = [
      ['GET / HTTP/1.1\r\n\r\n', 400, /no Host/],
      ['POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n', 400, /both/],
      ['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n', 501, /only chunked/],
      [`GET / HTTP/1.1\r\nHost: h\r\nX: ${'a'.repeat(20_000)}`, 431, /larger than/],
    ];
    for (const [text, status, message] of cases) {
      const { got, closed } = await exchange(text);
      assert.ok(closed, 'the connection is closed');
      assert.ok(got.startsWith(`HTTP/1.1 ${status} `), got.slice(0, 80));
      assert.match(got, /Connection: close\r\n/);
      assert.match(JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)).message, message);
    }
  });

  it('answers a malformed chunked body with a 400 JSON naming the fault, even while the handler is reading it, and drops what the handler writes after', async () => {
    const cases: [string, RegExp][] = [
      ['zz\r\nabc\r\n0\r\n\r\n', /bad chunk size line "zz"/],
      ['3;\r\nabc\r\n0\r\n\r\n', /bad chunk size line "3;"/],
      ['3;a=\r\nabc\r\n0\r\n\r\n', /bad chunk size line/],
      ['3\nabc\r\n0\r\n\r\n', /chunk size line does not end in CRLF/],
      ['3\r\nabcX\r\n0\r\n\r\n', /chunk data not followed by CRLF/],
      ['3\r\nabc\r\n0\r\nbad trailer\r\n\r\n', /bad trailer line "bad trailer"/],
      [`${'f'.repeat(20)}\r\n`, /bad chunk size line|too long/],
    ];
    for (const [body, message] of cases) {
      let read = 0;
      let abandonedWrites = 0;
      handler = (req, res) => {
        // A proxy forwarding the body: it reads, answers only at the end, and learns of the client going away.
        req.body?.on('data', (c: Buffer) => (read += c.length));
        req.body?.on('error', () => {});
        res.watcher = {
          clientClosed() {
            // A late answer from the instance's side must not reach the client.
            setImmediate(() => {
              abandonedWrites++;
              res.writeHead(502, ['Content-Length', '3']);
              res.end('bad');
            });
          },
          drained() {},
        };
      };
      const { got, closed } = await exchange(['POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n', '2\r\nok\r\n', body]);
      assert.ok(closed, 'the connection is closed');
      assert.ok(got.startsWith('HTTP/1.1 400 '), `${JSON.stringify(body)}: ${got.slice(0, 80)}`);
      assert.match(got, /Connection: close\r\n/);
      assert.match(JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)).message, message);
      assert.equal(count(got, /HTTP\/1\.1 /g), 1, 'one answer, not the handler\'s as well');
      assert.ok(read >= 2, 'the handler had begun reading the body');
      assert.equal(abandonedWrites, 1, 'the handler was told the client is gone');
    }
  });

  /** The handler tries `write` (a head that would split the response), then answers hello: the error it got, and what the client saw. */
  async function splitAttempt(write: (res: Http1Response) => void): Promise<{ code: unknown; got: string }> {
    let err: unknown;
    handler = (req, res) => {
      try {
        write(res);
      } catch (e) {
        err = e;
      }
      hello(req, res);
    };
    const { got } = await exchange('GET /h HTTP/1.1\r\nHost: h\r\n\r\n', (g) => g.includes('hello /h'));
    return { code: (err as { code?: string } | undefined)?.code, got };
  }

  it('refuses response headers that would split the response', async () => {
    const { code, got } = await splitAttempt((res) => res.writeHead(200, ['X-Evil', 'a\r\nSet-Cookie: x=1']));
    assert.equal(code, 'ERR_INVALID_CHAR');
    assert.ok(!got.includes('Set-Cookie'));
  });

  it('writes headers checked beforehand (HeaderLines) as writeHead writes the same list, and refuses a bad one before anything goes out', async () => {
    const list = ['Content-Type', 'text/plain', 'Connection', 'close', 'Content-Length', '5', 'Transfer-Encoding', 'chunked'];
    const lines = new HeaderLines(list);
    const heads: string[] = [];
    for (const how of ['writeHead', 'writeHeadWith', 'writeHeadWith after setHeader', 'writeHead after setHeader of another', 'writeHeadWith after setHeader of another'] as const) {
      handler = (_req, res) => {
        if (how.endsWith('another')) res.setHeader('X-Other', '2');
        if (how === 'writeHead' || how.startsWith('writeHead ')) res.writeHead(200, [...list, 'X-Id', 'one']);
        else {
          if (how === 'writeHeadWith after setHeader') res.setHeader('x-id', 'replaced');
          res.writeHeadWith(200, lines, 'X-Id', 'one');
        }
        res.end('hello');
      };
      const { got } = await exchange('GET /h HTTP/1.1\r\nHost: h\r\n\r\n', (g) => g.endsWith('hello'));
      heads.push(got.replace(/Date: [^\r]+/, 'Date: -'));
    }
    assert.equal(heads[1], heads[0]);
    assert.equal(heads[2], heads[0], 'a header set before, of the same name, is replaced');
    assert.equal(heads[4], heads[3], 'a header set before, of another name, goes out as with writeHead');
    assert.match(heads[3], /^HTTP\/1\.1 200 OK\r\nX-Other: 2\r\nContent-Type: text\/plain\r\n/);
    // The server's framing and connection headers, not the list's: Content-Length kept, Transfer-Encoding dropped, the close honoured.
    assert.match(heads[0], /^HTTP\/1\.1 200 OK\r\nContent-Type: text\/plain\r\nContent-Length: 5\r\nX-Id: one\r\nDate: -\r\nConnection: close\r\n\r\nhello$/);
    assert.throws(() => new HeaderLines(['X-Evil', 'a\r\nSet-Cookie: x=1']), { code: 'ERR_INVALID_CHAR' });
    assert.throws(() => new HeaderLines(['Bad Name', 'x']), { code: 'ERR_INVALID_HTTP_TOKEN' });
    // The header written after the lines may not be one of the server's own: nothing would check it against the framing.
    const framed = await splitAttempt((res) => res.writeHeadWith(200, new HeaderLines([]), 'Content-Length', '1000'));
    assert.equal(framed.code, 'ERR_HTTP_INVALID_HEADER_VALUE');
    assert.ok(!framed.got.includes('1000'));
    const { code, got } = await splitAttempt((res) => res.writeHeadWith(200, new HeaderLines(['Content-Length', '5']), 'X-Evil', 'a\r\nSet-Cookie: x=1'));
    assert.equal(code, 'ERR_INVALID_CHAR');
    assert.ok(!got.includes('Set-Cookie'));
  });

  it('tells the response watcher when the client goes away mid-response', async () => {
    let closedSeen: () => void = () => {};
    const seen = new Promise<void>((r) => {
      closedSeen = r;
    });
    handler = (_req, res) => {
      res.watcher = { clientClosed: () => closedSeen(), drained() {} };
      res.writeHead(200, ['Content-Type', 'text/plain']);
      res.write('partial');
    };
    await exchange('GET / HTTP/1.1\r\nHost: h\r\n\r\n', (g) => g.includes('partial'));
    await seen;
  });

  it('cuts a body shorter than its Content-Length rather than keep the connection', async () => {
    handler = (_req, res) => {
      res.writeHead(200, ['Content-Length', '10']);
      res.end('short');
    };
    const { closed } = await exchange('GET / HTTP/1.1\r\nHost: h\r\n\r\n');
    assert.ok(closed);
  });

  it('survives a client that leaves mid-upload while nobody reads the body', async () => {
    let answer: () => void = () => {};
    handler = (req, res) => {
      // Answered later, the body never read: its destroy must not be an uncaught error.
      answer = () => hello(req, res);
    };
    const socket = net.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\nabc');
    await new Promise((r) => setTimeout(r, 20));
    socket.destroy();
    await new Promise((r) => setTimeout(r, 20));
    answer();
    handler = hello;
    const { got } = await exchange('GET /after HTTP/1.1\r\nHost: h\r\n\r\n', (g) => g.includes('hello /after'));
    assert.match(got, /hello \/after/);
  });

  it('serves nothing after a response that closes the connection, even what was pipelined behind it', async () => {
    const seen: string[] = [];
    handler = (req, res) => {
      seen.push(req.url);
      hello(req, res);
    };
    const { got, closed } = await exchange(['POST /first HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: 5\r\n\r\n', 'abcdeGET /second HTTP/1.1\r\nHost: h\r\n\r\n']);
    assert.ok(closed);
    assert.deepEqual(seen, ['/first']);
    assert.ok(!got.includes('/second'));
  });

  it('closes a refused connection even when the client keeps its side open', async () => {
    const before = server.connections;
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    socket.on('data', () => {});
    socket.write('BAD\r\n\r\n');
    await once(socket, 'end');
    for (let i = 0; i < 50 && server.connections > before; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(server.connections, before);
    socket.destroy();
  });

  it('times out a head that stops arriving, also one pipelined behind an answered request', async () => {
    const s2 = new Http1Server({ keepAliveTimeoutMs: 60_000, headersTimeoutMs: 100, handle: hello, refuse: (res) => res.end(), handlerFailed() {} });
    const p = (await s2.listen(0, '127.0.0.1')).port;
    const socket = net.connect(p, '127.0.0.1');
    await once(socket, 'connect');
    let got = '';
    socket.on('data', (d) => {
      got += d.toString();
    });
    socket.write('GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHo');
    await once(socket, 'close');
    assert.match(got, /hello \/1/);
    assert.equal(got.split('HTTP/1.1 200 OK').length, 3, 'the refusal follows the answer');
    await s2.close(0);
  });

  it('on close, lets a request under way finish with Connection: close', async () => {
    const s2 = new Http1Server({
      keepAliveTimeoutMs: 65_000,
      headersTimeoutMs: 66_000,
      handle: (req, res) => setTimeout(() => hello(req, res), 50),
      refuse() {},
      handlerFailed() {},
    });
    const p = (await s2.listen(0, '127.0.0.1')).port;
    const idle = net.connect(p, '127.0.0.1');
    await once(idle, 'connect');
    const busy = net.connect(p, '127.0.0.1');
    await once(busy, 'connect');
    let got = '';
    busy.on('data', (d) => {
      got += d.toString();
    });
    busy.write('GET /last HTTP/1.1\r\nHost: h\r\n\r\n');
    await new Promise((r) => setTimeout(r, 10));
    const idleClosed = once(idle, 'close');
    await s2.close(2000);
    await idleClosed;
    assert.match(got, /Connection: close\r\n/);
    assert.match(got, /hello \/last$/);
    busy.destroy();
  });
});
