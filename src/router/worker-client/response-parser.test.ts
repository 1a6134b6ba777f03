import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_HEAD_BYTES, ResponseParser, type ResponseSink } from './response-parser.ts';

class Recorder implements ResponseSink {
  status = 0;
  headers: readonly string[] = [];
  heads = 0;
  body: Buffer[] = [];
  ended = 0;
  onHead(status: number, headers: readonly string[]): void {
    this.status = status;
    this.headers = headers;
    this.heads++;
  }
  lasts = 0;
  /** Chunks to take before pushing back (once each time it is reset). */
  takeBeforePushBack = Number.POSITIVE_INFINITY;
  onBody(chunk: Buffer, last: boolean): boolean {
    this.body.push(Buffer.from(chunk));
    if (last) this.lasts++;
    return this.body.length < this.takeBeforePushBack;
  }
  onEnd(): void {
    this.ended++;
  }
  switched: readonly string[] | undefined;
  onUpgrade(headers: readonly string[]): void {
    this.switched = headers;
  }
  get text(): string {
    return Buffer.concat(this.body).toString();
  }
}

function parse(wire: string | Buffer, opts: { noBody?: boolean; split?: number; upgrade?: boolean } = {}): { rec: Recorder; parser: ResponseParser } {
  const rec = new Recorder();
  const parser = new ResponseParser(rec);
  parser.start(opts.noBody ?? false, opts.upgrade ?? false);
  const buf = typeof wire === 'string' ? Buffer.from(wire, 'latin1') : wire;
  const step = opts.split ?? buf.length;
  for (let i = 0; i < buf.length; i += step) parser.execute(buf.subarray(i, i + step));
  return { rec, parser };
}

/** Every way of cutting the bytes in two, plus one byte at a time, must parse the same. */
function everySplit(wire: string, check: (rec: Recorder, parser: ResponseParser) => void): void {
  const buf = Buffer.from(wire, 'latin1');
  for (let cut = 1; cut < buf.length; cut++) {
    const rec = new Recorder();
    const parser = new ResponseParser(rec);
    parser.start(false);
    parser.execute(buf.subarray(0, cut));
    parser.execute(buf.subarray(cut));
    check(rec, parser);
  }
  const { rec, parser } = parse(wire, { split: 1 });
  check(rec, parser);
}

describe('ResponseParser', () => {
  it('reads a Content-Length body however the bytes are split', () => {
    const wire = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nX-Odd:  spaced value \r\n\r\nhello world';
    everySplit(wire, (rec, parser) => {
      assert.equal(rec.status, 200);
      assert.deepEqual(rec.headers, ['Content-Type', 'text/plain', 'Content-Length', '11', 'X-Odd', 'spaced value']);
      assert.equal(rec.text, 'hello world');
      assert.equal(rec.ended, 1);
      assert.equal(rec.lasts, 1, 'the final chunk is marked');
      assert.equal(parser.done, true);
      assert.equal(parser.keepAlive, true);
    });
  });

  it('reads a chunked body with extensions and trailers however the bytes are split', () => {
    const wire = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n';
    everySplit(wire, (rec, parser) => {
      assert.equal(rec.text, 'hello 0123456789');
      assert.equal(rec.ended, 1);
      assert.equal(parser.keepAlive, true);
      assert.equal(parser.trailingBytes, false);
    });
    everySplit('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n', (rec) => {
      assert.equal(rec.text, 'ok');
      assert.equal(rec.ended, 1);
    });
  });

  it('takes a 101 to an upgrade request and keeps what follows unparsed, however the bytes are split', () => {
    const wire = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x02hi';
    for (const split of [1, 7, 1000]) {
      const { rec, parser } = parse(wire, { upgrade: true, split });
      assert.deepEqual(rec.switched, ['Upgrade', 'websocket', 'Connection', 'Upgrade']);
      assert.equal(rec.heads, 0);
      assert.equal(parser.takeRest().toString('latin1'), '\x81\x02hi');
      assert.equal(parser.takeRest().length, 0, 'handed over once');
      assert.equal(parser.keepAlive, false);
    }
    // An upgrade request may still get an ordinary answer.
    const { rec, parser } = parse('HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\nno', { upgrade: true });
    assert.equal(rec.switched, undefined);
    assert.equal(rec.status, 400);
    assert.equal(rec.text, 'no');
    assert.equal(parser.keepAlive, false, 'a connection that carried an upgrade is never reused, whatever the answer says');
  });

  it('skips 1xx interim responses and refuses a 101 nobody asked for', () => {
    const { rec } = parse('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok');
    assert.equal(rec.heads, 1);
    assert.equal(rec.status, 201);
    assert.equal(rec.text, 'ok');
    assert.throws(() => parse('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n'), { code: 'UPSTREAM_BAD_RESPONSE', message: /101/ });
  });

  it('expects no body after HEAD, 204 and 304, whatever the length says', () => {
    for (const [wire, noBody] of [
      ['HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n', true],
      ['HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n', false],
      ['HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n', false],
      ['HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', false],
    ] as const) {
      const { rec, parser } = parse(wire, { noBody });
      assert.equal(rec.ended, 1, wire);
      assert.equal(rec.body.length, 0);
      assert.equal(parser.keepAlive, true);
    }
  });

  it('reads a body without framing until the connection closes, and does not reuse it', () => {
    const { rec, parser } = parse('HTTP/1.1 200 OK\r\n\r\nsome bytes');
    assert.equal(rec.ended, 0);
    assert.equal(parser.keepAlive, false);
    assert.equal(parser.finishOnClose(), true);
    assert.equal(rec.text, 'some bytes');
    assert.equal(rec.ended, 1);
    // A close in the middle of a framed body is not an ending.
    const framed = parse('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
    assert.equal(framed.parser.finishOnClose(), false);
    assert.equal(framed.rec.ended, 0);
  });

  it('decides reuse from the version, Connection and Keep-Alive', () => {
    assert.equal(parse('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n').parser.keepAlive, false);
    assert.equal(parse('HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0\r\n\r\n').parser.keepAlive, false);
    assert.equal(parse('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n').parser.keepAlive, false);
    assert.equal(parse('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n').parser.keepAlive, true);
    const hinted = parse('HTTP/1.1 200 OK\r\nKeep-Alive: max=100, timeout=5\r\nContent-Length: 0\r\n\r\n').parser;
    assert.equal(hinted.keepAliveHintMs, 5000);
    assert.equal(parse('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n').parser.keepAliveHintMs, undefined);
  });

  it('notes bytes after the end of a response', () => {
    const { rec, parser } = parse('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA');
    assert.equal(rec.text, 'ok');
    assert.equal(parser.trailingBytes, true);
    assert.equal(parser.keepAlive, false);
  });

  it('accepts a list of equal Content-Length values, passing one number on', () => {
    const list = parse('HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok').rec;
    assert.equal(list.text, 'ok');
    assert.deepEqual(list.headers, ['Content-Length', '2']);
    const twice = parse('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX: y\r\ncontent-length: 2\r\n\r\nok').rec;
    assert.equal(twice.text, 'ok');
    assert.deepEqual(twice.headers, ['Content-Length', '2', 'X', 'y']);
  });

  it('refuses malformed responses, naming what is wrong', () => {
    const bad: Array<[string, RegExp]> = [
      ['HTTP/2 200 OK\r\n\r\n', /status line/],
      ['HTTP/1.1 20 OK\r\n\r\n', /status line/],
      ['HTTP/1.1 200 OK\r\nno colon here\r\n\r\n', /header line/],
      ['HTTP/1.1 200 OK\r\n: empty name\r\n\r\n', /header line/],
      ['HTTP/1.1 200 OK\r\nA: b\r\n  folded\r\n\r\n', /folded/],
      ['HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', /Content-Length/],
      ['HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n', /Content-Length/],
      ['HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n', /conflicting/],
      ['HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n', /conflicting/],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', /chunk size/],
      // Both framings could smuggle a second response to the router's client.
      ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n', /both Transfer-Encoding and Content-Length/],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz', /other than chunked/],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', /other than chunked/],
      ['HTTP/1.1 200 OK\nContent-Length: 1\n\nx', /bare LF/],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX', /CRLF/],
    ];
    for (const [wire, message] of bad) assert.throws(() => parse(wire), { code: 'UPSTREAM_BAD_RESPONSE', message }, wire);
  });

  // Found by differential fuzzing against llhttp (response-parser.fuzz.test.ts).
  it('refuses header lines a lenient reader would split or read otherwise, and an HTTP/1.0 chunked body', () => {
    const bad: Array<[string, RegExp]> = [
      // Read as no Content-Length (a body until the close) here, as a Content-Length by readers that strip the space.
      ['HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello', /bad header name/],
      ['HTTP/1.1 200 OK\r\nX\x00: y\r\nContent-Length: 0\r\n\r\n', /bad header name/],
      // A bare LF or CR is a line end to some readers: here it hid a Content-Length inside another header's value.
      ['HTTP/1.1 200 OK\r\nX: a\nContent-Length: 5\r\n\r\nhello', /control character/],
      ['HTTP/1.1 200 OK\r\nX: a\rContent-Length: 5\r\n\r\nhello', /control character/],
      ['HTTP/1.1 200 OK\nContent-Length: 5\r\n\r\nhello', /status line/],
      ['HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n2\r\nok\r\n0\r\n\r\n', /HTTP\/1\.0/],
      // A no-break space is no whitespace to HTTP (llhttp reads this body until the close), nor one of two codings chunked.
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding:\xa0chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n', /other than chunked/],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n', /other than chunked/],
    ];
    for (const [wire, message] of bad) assert.throws(() => parse(wire), { code: 'UPSTREAM_BAD_RESPONSE', message }, wire);
  });

  it('takes leading zeros in a Content-Length and a chunk size', () => {
    const { rec } = parse('HTTP/1.1 200 OK\r\nContent-Length: 0000000000000000002\r\n\r\nok');
    assert.equal(rec.text, 'ok');
    assert.deepEqual(rec.headers, ['Content-Length', '2']);
    assert.equal(parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000002\r\nok\r\n0000000000000\r\n\r\n').rec.text, 'ok');
  });

  it('reads Connection as a list of whole tokens', () => {
    assert.equal(parse('HTTP/1.0 200 OK\r\nConnection: not-keep-alive\r\nContent-Length: 0\r\n\r\n').parser.keepAlive, false);
    assert.equal(parse('HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n').parser.keepAlive, true);
    assert.equal(parse('HTTP/1.0 200 OK\r\nConnection: \xa0keep-alive\r\nContent-Length: 0\r\n\r\n').parser.keepAlive, false);
    assert.equal(parse('HTTP/1.0 200 OK\r\nConnection: te,\tkeep-alive \r\nContent-Length: 0\r\n\r\n').parser.keepAlive, true);
  });

  it('refuses a head larger than the limit, even when it never ends', () => {
    const endless = Buffer.from(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}`);
    assert.throws(() => parse(endless, { split: 1024 }), { code: 'UPSTREAM_BAD_RESPONSE', message: /larger than/ });
    const whole = Buffer.from(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`);
    assert.throws(() => parse(whole), { code: 'UPSTREAM_BAD_RESPONSE', message: /larger than/ });
  });

  it('refuses bytes when no request is in flight', () => {
    const parser = new ResponseParser(new Recorder());
    assert.throws(() => parser.execute(Buffer.from('HTTP/1.1 200 OK\r\n\r\n')), { code: 'UPSTREAM_BAD_RESPONSE' });
  });

  it('stops at the chunk the sink pushes back on, and goes on from there with nothing new', () => {
    const rec = new Recorder();
    const parser = new ResponseParser(rec);
    parser.start(false);
    rec.takeBeforePushBack = 1;
    parser.execute(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n'));
    assert.equal(rec.text, 'a');
    assert.equal(parser.holding, true);
    rec.takeBeforePushBack = 2;
    parser.execute(Buffer.alloc(0));
    assert.equal(rec.text, 'ab');
    rec.takeBeforePushBack = Number.POSITIVE_INFINITY;
    parser.execute(Buffer.alloc(0));
    assert.equal(rec.text, 'abc');
    assert.equal(rec.ended, 1);
    assert.equal(parser.holding, false);
  });

  it('starts fresh for each request on the same connection', () => {
    const rec = new Recorder();
    const parser = new ResponseParser(rec);
    parser.start(false);
    parser.execute(Buffer.from('HTTP/1.1 200 OK\r\nConnection: close\r\nKeep-Alive: timeout=3\r\nContent-Length: 1\r\n\r\na'));
    assert.equal(parser.keepAlive, false);
    parser.start(false);
    parser.execute(Buffer.from('HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nb'));
    assert.equal(rec.status, 404);
    assert.equal(rec.text, 'ab');
    assert.equal(rec.ended, 2);
    assert.equal(parser.keepAlive, true);
    assert.equal(parser.keepAliveHintMs, undefined);
  });
});

describe('ResponseParser, a head that repeats the last one', () => {
  const HEAD = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nKeep-Alive: timeout=7\r\n\r\n';

  function connection(): { rec: Recorder; parser: ResponseParser; send(wire: string | Buffer, o?: { noBody?: boolean; upgrade?: boolean }): void } {
    const rec = new Recorder();
    const parser = new ResponseParser(rec);
    return {
      rec,
      parser,
      send(wire, o = {}) {
        parser.start(o.noBody ?? false, o.upgrade ?? false);
        parser.execute(typeof wire === 'string' ? Buffer.from(wire, 'latin1') : wire);
      },
    };
  }

  it('gives the same frozen header list, which a handler cannot change for the next response', () => {
    const c = connection();
    c.send(`${HEAD}hello`);
    const first = c.rec.headers;
    c.send(`${HEAD}world`);
    assert.equal(c.rec.headers, first, 'the list is shared');
    assert.ok(Object.isFrozen(first));
    assert.throws(() => (first as string[]).push('X-Evil', '1'), TypeError);
    assert.equal(c.rec.text, 'helloworld');
    assert.equal(c.parser.keepAliveHintMs, 7000);
  });

  it('parses a head again when a single byte differs, and frames the body by it', () => {
    const c = connection();
    c.send(`${HEAD}hello`);
    c.send(`${HEAD.replace('Length: 5', 'Length: 6')}hello!`);
    assert.equal(c.rec.ended, 2);
    assert.equal(c.rec.text, 'hellohello!');
    assert.deepEqual(c.rec.headers, ['Content-Type', 'text/plain', 'Content-Length', '6', 'Keep-Alive', 'timeout=7']);
    // Same length, one byte changed: a chunked head where the last one had a length.
    const chunked = HEAD.replace('Content-Length: 5', 'Transfer-Encoding: chunked').replace('timeout=7', 'timeout=77');
    c.send(`${chunked}3\r\nabc\r\n0\r\n\r\n`);
    assert.equal(c.rec.text, 'hellohello!abc');
    assert.equal(c.parser.keepAliveHintMs, 77000);
  });

  it('takes what depends on the request from the request, not from the head it repeats', () => {
    const c = connection();
    // A HEAD request's answer has no body, whatever its Content-Length says ...
    c.send(HEAD, { noBody: true });
    assert.equal(c.parser.done, true);
    // ... and the same head to a GET has one.
    c.send(`${HEAD}hello`);
    assert.equal(c.rec.text, 'hello');
    assert.equal(c.parser.keepAlive, true);
    // An instance that declined an upgrade may not be sent another request, even with a head it sent before.
    c.send(`${HEAD}again`, { upgrade: true });
    assert.equal(c.parser.keepAlive, false);
    c.send(`${HEAD}fresh`);
    assert.equal(c.parser.keepAlive, true);
  });

  it('refuses a bad head every time it comes: a refusal is never remembered', () => {
    const c = connection();
    const bad = 'HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 0\r\n\r\n';
    assert.throws(() => c.send(bad), /bad header name/);
    assert.throws(() => c.send(bad), /bad header name/);
    c.send(`${HEAD}hello`);
    assert.throws(() => c.send(`${HEAD.replace('Content-Type', 'Content Type')}hello`), /bad header name/);
  });

  it('keeps its own copy of the bytes: a socket buffer written over afterwards changes nothing', () => {
    const c = connection();
    const buf = Buffer.from(`${HEAD}hello`, 'latin1');
    c.send(buf);
    // The same memory, reused for the next read with other bytes in it.
    buf.write(HEAD.replace('Length: 5', 'Length: 3'), 0, 'latin1');
    c.send(buf.subarray(0, HEAD.length + 3));
    assert.deepEqual(c.rec.headers, ['Content-Type', 'text/plain', 'Content-Length', '3', 'Keep-Alive', 'timeout=7']);
    assert.equal(c.rec.text, 'hellohel');
    c.send(`${HEAD}12345`);
    assert.equal(c.rec.text, 'hellohel12345');
  });

  it('parses a head split across reads like any other', () => {
    const c = connection();
    c.send(`${HEAD}hello`);
    c.parser.start(false);
    const wire = Buffer.from(`${HEAD}world`, 'latin1');
    c.parser.execute(wire.subarray(0, 20));
    c.parser.execute(wire.subarray(20));
    assert.equal(c.rec.text, 'helloworld');
    assert.equal(c.rec.ended, 2);
  });
});
