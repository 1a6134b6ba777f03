import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FlintError } from '../../api/errors.ts';
import { type RequestHead, RequestParser, type RequestSink } from './request-parser.ts';

class Recorder implements RequestSink {
  heads: RequestHead[] = [];
  bodies: string[] = [];
  ends = 0;
  parser = new RequestParser(this);
  /** Answer each request at once (as a synchronous 404 would), so the parser goes on to the next. */
  readonly answerAtOnce: boolean;
  constructor(answerAtOnce = true) {
    this.answerAtOnce = answerAtOnce;
  }
  onRequest(head: RequestHead): void {
    this.heads.push(head);
    this.bodies.push('');
    if (!head.hasBody && this.answerAtOnce) this.parser.next();
  }
  onBody(chunk: Buffer): boolean {
    this.bodies[this.bodies.length - 1] += chunk.toString('latin1');
    return true;
  }
  onRequestEnd(): void {
    this.ends++;
    if (this.answerAtOnce) this.parser.next();
  }
}

function parse(text: string): Recorder {
  const r = new Recorder();
  r.parser.execute(Buffer.from(text, 'latin1'));
  return r;
}

function refusal(text: string): FlintError {
  try {
    parse(text);
  } catch (err) {
    assert.ok(err instanceof FlintError, `expected a FlintError, got ${err}`);
    return err;
  }
  assert.fail(`accepted ${JSON.stringify(text)}`);
}

const PIPELINE =
  'POST /a?x=1 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1;q="a b"\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n' +
  'GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n' +
  'PUT /c HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc';

describe('RequestParser', () => {
  it('parses pipelined requests with chunked and Content-Length bodies', () => {
    const r = parse(PIPELINE);
    assert.deepEqual(
      r.heads.map((h) => [h.method, h.url, h.hasBody, h.keepAlive]),
      [
        ['POST', '/a?x=1', true, true],
        ['GET', '/b', false, false],
        ['PUT', '/c', true, true],
      ],
    );
    assert.deepEqual(r.bodies, ['hello world', '', 'abc']);
    assert.equal(r.ends, 2);
    assert.deepEqual(r.heads[0].rawHeaders, ['Host', 'h', 'Transfer-Encoding', 'chunked']);
  });

  it('gives the same result whatever the bytes are split into', () => {
    const bytes = Buffer.from(PIPELINE, 'latin1');
    for (let cut = 1; cut < bytes.length; cut++) {
      const r = new Recorder();
      r.parser.execute(bytes.subarray(0, cut));
      r.parser.execute(bytes.subarray(cut));
      assert.deepEqual(r.bodies, ['hello world', '', 'abc'], `split at ${cut}`);
      assert.equal(r.heads.length, 3, `split at ${cut}`);
    }
  });

  it('holds the next request until next() is called', () => {
    const r = new Recorder(false);
    r.parser.execute(Buffer.from('GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n'));
    assert.equal(r.heads.length, 1);
    assert.ok(r.parser.buffered > 0);
    r.parser.next();
    assert.deepEqual(
      r.heads.map((h) => h.url),
      ['/1', '/2'],
    );
  });

  it('reads HTTP/1.0 keep-alive, Expect: 100-continue, and skips empty lines before a request', () => {
    const r = parse('\r\nGET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
    assert.deepEqual(
      r.heads.map((h) => [h.http10, h.keepAlive]),
      [
        [true, false],
        [true, true],
      ],
    );
    const e = parse('POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\nx');
    assert.equal(e.heads[0].expectContinue, true);
  });

  it('marks an upgrade only when Connection names it on a bodiless HTTP/1.1 request, and keeps the bytes after it unparsed', () => {
    const r = new Recorder(false);
    r.parser.execute(Buffer.from('GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x85not http', 'latin1'));
    assert.equal(r.heads.length, 1);
    assert.equal(r.heads[0].upgrade, 'websocket');
    assert.equal(r.parser.takeRest().toString('latin1'), '\x81\x85not http');
    assert.equal(r.parser.takeRest().length, 0);
    for (const text of [
      'GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: h\r\nConnection: upgraded\r\nUpgrade: websocket\r\n\r\n',
      'GET / HTTP/1.0\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 1\r\n\r\nx',
      'GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n',
    ]) {
      assert.equal(parse(text).heads[0].upgrade, undefined, text);
    }
  });

  it('refuses requests that could desynchronise the connection, naming what is wrong', () => {
    const cases: [string, string, RegExp][] = [
      ['GET / HTTP/1.1\r\n\r\n', 'FLINT_ERR_VALIDATION', /no Host/],
      ['GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 'FLINT_ERR_VALIDATION', /more than one Host/],
      ['POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n', 'FLINT_ERR_VALIDATION', /both/],
      ['POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n', 'FLINT_ERR_VALIDATION', /more than one Content-Length/],
      ['POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n', 'FLINT_ERR_VALIDATION', /bad Content-Length/],
      ['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 'FLINT_ERR_NOT_IMPLEMENTED', /only chunked/],
      ['POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n', 'FLINT_ERR_VALIDATION', /HTTP\/1.0/],
      ['GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n', 'FLINT_ERR_VALIDATION', /folded/],
      ['GET / HTTP/1.1\r\nHost : h\r\n\r\n', 'FLINT_ERR_VALIDATION', /bad header name/],
      ['GET / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n', 'FLINT_ERR_VALIDATION', /control character/],
      ['GET / HTTP/1.1\nHost: h\n\n', 'FLINT_ERR_VALIDATION', /bare LF/],
      ['GET /a b HTTP/1.1\r\nHost: h\r\n\r\n', 'FLINT_ERR_VALIDATION', /version/],
      ['G(T / HTTP/1.1\r\nHost: h\r\n\r\n', 'FLINT_ERR_VALIDATION', /bad method/],
      ['GET / HTTP/2.0\r\nHost: h\r\n\r\n', 'FLINT_ERR_VALIDATION', /unsupported version/],
      ['GET / HTTP/1.1\r\nHost: h\r\nExpect: magic\r\n\r\n', 'FLINT_ERR_EXPECTATION_FAILED', /Expect/],
      ['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 'FLINT_ERR_VALIDATION', /bad chunk size/],
      ['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n', 'FLINT_ERR_VALIDATION', /not followed by CRLF/],
      ['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n', 'FLINT_ERR_VALIDATION', /bad chunk size/],
      ['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\r\nhello\r\n', 'FLINT_ERR_VALIDATION', /bad chunk size/],
      ['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\x01\r\nhello\r\n', 'FLINT_ERR_VALIDATION', /bad chunk size/],
      ['POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\nGET / HTTP/1.1\r\n\r\n', 'FLINT_ERR_VALIDATION', /bad trailer line/],
      [`POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;${'a'.repeat(5000)}\r\n`, 'FLINT_ERR_VALIDATION', /too long/],
      [`GET / HTTP/1.1\r\nHost: h\r\nX: ${'a'.repeat(17_000)}\r\n\r\n`, 'FLINT_ERR_HEADERS_TOO_LARGE', /larger than/],
      [`GET / HTTP/1.1\r\nHost: h\r\nX: ${'a'.repeat(17_000)}`, 'FLINT_ERR_HEADERS_TOO_LARGE', /larger than/],
    ];
    for (const [text, code, message] of cases) {
      const err = refusal(text);
      assert.equal(err.code, code, JSON.stringify(text.slice(0, 80)));
      assert.match(err.message, message, JSON.stringify(text.slice(0, 80)));
    }
  });

  // Found by differential fuzzing against llhttp (request-parser.fuzz.test.ts).
  it('refuses CONNECT, whose body it would otherwise read where the client sends tunnel bytes', () => {
    const err = refusal('CONNECT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: h\r\n\r\n');
    assert.equal(err.code, 'FLINT_ERR_NOT_IMPLEMENTED');
    assert.equal(refusal('CONNECT h:443 HTTP/1.1\r\nHost: h\r\n\r\n').code, 'FLINT_ERR_NOT_IMPLEMENTED');
  });

  it('takes only origin-form, absolute-form and OPTIONS * targets, in ASCII', () => {
    for (const target of ['/a?b#c', 'http://h:80/a', 'HTTPS://[::1]/', 'web+x://h?q', 'http://h']) {
      assert.equal(parse(`GET ${target} HTTP/1.1\r\nHost: h\r\n\r\n`).heads[0].url, target);
    }
    assert.equal(parse('OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n').heads[0].url, '*');
    for (const target of ['noslash', 'h:80', '*', '*x', '?q', 'mailto:a@b', 'http:/a', 'http://a{b/', 'http://a|b', 'http://a#f', '/caf\xe9', '1http://h/']) {
      const err = refusal(`GET ${target} HTTP/1.1\r\nHost: h\r\n\r\n`);
      assert.equal(err.code, 'FLINT_ERR_VALIDATION', target);
      assert.match(err.message, /request target/, target);
    }
  });

  it('takes leading zeros in a Content-Length and a chunk size, and refuses more digits than a length can hold', () => {
    const r = parse('POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 00000000000000000002\r\n\r\nab');
    assert.deepEqual(r.bodies, ['ab']);
    const c = parse('POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000002\r\nab\r\n00000000000000000\r\n\r\n');
    assert.deepEqual(c.bodies, ['ab']);
    assert.equal(c.ends, 1);
    assert.match(refusal('POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1000000000000000\r\n\r\n').message, /bad Content-Length/);
    assert.match(refusal('POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000\r\n').message, /bad chunk size/);
  });

  it('reads Connection as a list of whole tokens', () => {
    const r = parse(
      'GET / HTTP/1.0\r\nConnection: :keep-alive\r\n\r\n' +
        'GET / HTTP/1.1\r\nHost: h\r\nConnection: xclose, te\r\n\r\n' +
        'GET / HTTP/1.1\r\nHost: h\r\nConnection: te, Close\r\n\r\n' +
        // A no-break space is no whitespace to HTTP.
        'GET / HTTP/1.0\r\nConnection: te,\xa0keep-alive\r\n\r\n' +
        'GET / HTTP/1.0\r\nConnection: te,\tkeep-alive\r\n\r\n',
    );
    assert.deepEqual(
      r.heads.map((h) => h.keepAlive),
      [false, true, false, false, true],
    );
  });

  it('stops at the chunk the sink pushes back on and goes on with nothing new', () => {
    const got: string[] = [];
    let push = false;
    const sink: RequestSink = {
      onRequest() {},
      onBody(chunk) {
        got.push(chunk.toString());
        return push;
      },
      onRequestEnd() {
        got.push('<end>');
      },
    };
    const p = new RequestParser(sink);
    p.execute(Buffer.from('POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n'));
    assert.deepEqual(got, ['ab']);
    push = true;
    p.execute(Buffer.alloc(0));
    assert.deepEqual(got, ['ab', 'cd', '<end>']);
  });
});

describe('RequestParser, a head that repeats the last one on the connection', () => {
  const HEAD = 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n';

  it('gives the same frozen head, and reads each request body by it', () => {
    const r = new Recorder();
    r.parser.execute(Buffer.from(`${HEAD}abc${HEAD}def`, 'latin1'));
    assert.equal(r.heads.length, 2);
    assert.equal(r.heads[1], r.heads[0], 'the head is shared');
    assert.ok(Object.isFrozen(r.heads[0]) && Object.isFrozen(r.heads[0].rawHeaders));
    assert.throws(() => (r.heads[0].rawHeaders as string[]).push('X-Evil', '1'), TypeError);
    assert.deepEqual(r.bodies, ['abc', 'def']);
    assert.equal(r.ends, 2);
  });

  it('parses a head again when a single byte differs, and frames the body by it', () => {
    const r = new Recorder();
    const chunked = HEAD.replace('Content-Length: 3', 'Transfer-Encoding: chunked');
    r.parser.execute(Buffer.from(`${HEAD}abc${HEAD.replace('Length: 3', 'Length: 4')}defg${chunked}1\r\nx\r\n0\r\n\r\n`, 'latin1'));
    assert.deepEqual(r.bodies, ['abc', 'defg', 'x']);
    assert.deepEqual(r.heads[1].rawHeaders, ['Host', 'h', 'Content-Length', '4']);
    assert.equal(r.heads[2].rawHeaders[3], 'chunked');
  });

  it('refuses a head of the same length as the last good one, with a line split where a lenient reader would not see it', () => {
    const r = new Recorder();
    const good = 'GET /a HTTP/1.1\r\nHost: h\r\nX-Pad:  12\r\n\r\n';
    const evil = 'GET /a HTTP/1.1\r\nHost: h\r\nX-Pad:\r\n12\r\n\r\n';
    assert.equal(evil.length, good.length);
    r.parser.execute(Buffer.from(good, 'latin1'));
    assert.throws(() => r.parser.execute(Buffer.from(evil, 'latin1')), /bad header line/);
  });

  it('keeps its own copy of the bytes: a socket buffer written over afterwards changes nothing', () => {
    const r = new Recorder();
    const buf = Buffer.from(`${HEAD}abc`, 'latin1');
    r.parser.execute(buf);
    buf.write(HEAD.replace('/a', '/b'), 0, 'latin1');
    r.parser.execute(buf);
    r.parser.execute(Buffer.from(`${HEAD}ghi`, 'latin1'));
    assert.deepEqual(
      r.heads.map((h) => h.url),
      ['/a', '/b', '/a'],
    );
    assert.deepEqual(r.bodies, ['abc', 'abc', 'ghi']);
  });
});
