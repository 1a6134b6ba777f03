// Differential fuzzing of the router's request parser against llhttp (node:http's
// parser), as DESIGN.md section 7 asks of an owned edge parser: generated
// requests, well-formed and mutated where framing lives, pipelined and cut
// into random reads, must be read alike by both (method, target, version,
// headers, body, where each request ends, whether the connection goes on),
// or refused by both, unless the table below names the difference and the
// RFC's reason for it. A difference that is not in the table fails the test
// with the input that shows it; llhttp is the reference, the RFC the judge.
//
// Seed 42 unless FLINT_FUZZ_SEED says otherwise (a number, or `random`), and
// FLINT_FUZZ_RUNS runs; a failure prints the seed and path to replay it.
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FlintError } from '../../api/errors.ts';
import {
  framingDifferences,
  divergence,
  fuzzParameters,
  judge,
  type KnownDifference,
  LLHTTP_METHODS,
  llhttpParse,
  type Message,
  messageAt,
  mutate,
  mutation,
  type Outcome,
  oursRefused,
  requestDraft,
  segments,
  serialize,
  theirsRefused,
} from '../testing/http-fuzz.ts';
import { type RequestHead, RequestParser } from './request-parser.ts';

/** The router's parser, fed `input` in the reads given; a request's end is where the bytes it holds back begin. */
function ours(reads: Buffer[], primer?: Buffer): Outcome {
  const messages: Message[] = [];
  let current: Message | undefined;
  let done = false;
  const parser = new RequestParser({
    onRequest(head: RequestHead) {
      current = {
        start: head.method,
        target: head.url,
        version: head.http10 ? '1.0' : '1.1',
        headers: [...head.rawHeaders],
        body: '',
        end: -1,
        keepAlive: head.keepAlive,
        upgrade: head.upgrade !== undefined,
      };
      if (!head.hasBody) done = true;
    },
    onBody(chunk: Buffer) {
      if (current !== undefined) current.body += chunk.toString('latin1');
      return true;
    },
    onRequestEnd() {
      done = true;
    },
  });
  if (primer !== undefined) {
    // An earlier request on the same connection, whose head the parser remembers.
    parser.execute(primer);
    if (!done || current === undefined || !current.keepAlive || current.upgrade || parser.buffered > 0) throw new Error('the primer is not one whole request the connection goes on after');
    done = false;
    current = undefined;
    parser.next();
  }
  let fed = 0;
  try {
    for (const read of reads) {
      fed += read.length;
      parser.execute(read);
      // Answered only now, not from inside the callbacks: the bytes held back tell where the request ended.
      while (done && current !== undefined) {
        done = false;
        current.end = fed - parser.buffered;
        messages.push(current);
        const last = current;
        current = undefined;
        // The connection ends with this request (as llhttp's reading stops): what follows is never read.
        if (!last.keepAlive || last.upgrade) return { messages, verdict: 'complete' };
        parser.next();
      }
    }
  } catch (err) {
    if (!(err instanceof FlintError)) throw err;
    return { messages, verdict: 'error', error: err.message, pending: current };
  }
  return { messages, verdict: parser.midRequest ? 'partial' : 'complete', pending: current };
}

/** The request line of the message the two parsers part on. */
function requestLine(input: string, outcome: Outcome): string {
  const rest = messageAt(input, outcome).replace(/^(\r\n)+/, '');
  const eol = rest.indexOf('\r\n');
  return eol === -1 ? rest : rest.slice(0, eol);
}

/** Where the router's parser and llhttp differ on purpose. */
const KNOWN: KnownDifference[] = [
  {
    what: 'an HTTP/1.1 request without Host, or any request with more than one, is refused (llhttp leaves that to node:http, whose server refuses the first too)',
    why: 'RFC 9112 3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1 request message that lacks a Host header field and to any request message that contains more than one Host header field line"',
    explains: (_, o, t) => oursRefused(o, t, /no Host header|more than one Host header/),
  },
  {
    what: 'an Expect other than 100-continue is answered 417',
    why: 'RFC 9110 10.1.1: "A server that receives an Expect field value containing a member other than 100-continue MAY respond with a 417 (Expectation Failed)"',
    explains: (_, o, t) => oursRefused(o, t, /^Expect .* is not supported$/),
  },
  {
    what: 'a Transfer-Encoding other than exactly chunked (gzip, chunked; chunked, chunked) is answered 501',
    why: 'RFC 9112 6.1: "A server that receives a request message with a transfer coding it does not understand SHOULD respond with 501 (Not Implemented)"; the router passes bodies on decoded and undoes no other coding',
    explains: (_, o, t) => oursRefused(o, t, /^Transfer-Encoding .* is not supported: only chunked$/),
  },
  {
    what: 'Transfer-Encoding in an HTTP/1.0 request is refused (llhttp reads it chunked)',
    why: 'RFC 9112 6.1: "A server or client that receives an HTTP/1.0 message containing a Transfer-Encoding header field MUST treat the message as if the framing is faulty"',
    explains: (_, o, t) => oursRefused(o, t, /Transfer-Encoding in an HTTP\/1\.0 request/),
  },
  {
    what: 'CONNECT is answered 501 and the connection closed (llhttp hands the connection over as a tunnel)',
    why: 'RFC 9110 9.3.6: after CONNECT the connection is a tunnel, not HTTP; the router opens none, and RFC 9110 9.1 answers a method a server does not implement with 501',
    explains: (_, o, t) => oursRefused(o, t, /^CONNECT is not supported/),
  },
  {
    what: 'the asterisk-form target `*` is taken only with OPTIONS',
    why: 'RFC 9112 3.2.4: "The asterisk-form of request-target is only used for a server-wide OPTIONS request"',
    explains: (input, o, t) => oursRefused(o, t, /is not in origin, absolute or asterisk form/) && /^\S+ \*/.test(requestLine(input, o)),
  },
  {
    what: 'any token is a method (llhttp knows a fixed list of upper-case names, and keeps PRI for the HTTP/2 preface)',
    why: 'RFC 9110 9.1: "method = token", case-sensitive and extensible; whether the method means anything is the function\'s to answer (501 or 405)',
    explains: (input, o, t) => {
      const method = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?= )/.exec(requestLine(input, t))?.[0];
      return theirsRefused(o, t, ['HPE_INVALID_METHOD', 'HPE_INVALID_VERSION', 'HPE_INVALID_CONSTANT']) && method !== undefined && (!LLHTTP_METHODS.includes(method) || method === 'PRI');
    },
  },
  {
    what: 'a request line with more than one space between its parts, or spaces around it, is refused (llhttp skips extra spaces)',
    why: 'RFC 9112 3: "request-line = method SP request-target SP HTTP-version"; an invalid request line SHOULD get a 400, and a lenient split is how a request reads differently to two servers (RFC 9112 3, 11.2)',
    explains: (input, o, t) =>
      oursRefused(o, t, /bad request line|target is empty|unsupported version|bad method|not in origin/) && /^\S+ {2}| {2}\S+$|^\S+ \S+ {2}| $|^ /.test(requestLine(input, o)),
  },
  {
    what: 'HTTP versions other than 1.0 and 1.1 are refused, a request line without one too (llhttp reads HTTP/2.0 as 1.x, and no version as HTTP/0.9)',
    why: 'RFC 9110 15.6.6: 505 (HTTP Version Not Supported) for a major version the server does not support; a request line naming HTTP/2.0, or none, is not an HTTP/1.1 message (RFC 9112 2.3, 3)',
    explains: (input, o, t) => {
      // llhttp read that request as another version: whatever ours said about it, it was no HTTP/1.x request.
      const version = t.messages[o.messages.length]?.version;
      if (oursRefused(o, t, /./) && version !== undefined && version !== '1.0' && version !== '1.1') return true;
      return oursRefused(o, t, /unsupported version|bad request line/) && !/^\S+ \S+ HTTP\/1\.[01]$/.test(requestLine(input, o));
    },
  },
  {
    what: 'a bare CR or LF before the request line is refused (llhttp skips it)',
    why: 'RFC 9112 2.2: a server SHOULD ignore at least one empty line (CRLF) before the request line; a bare CR MUST be treated as invalid, and the router reads no bare LF as a line end',
    explains: (input, o, t) =>
      // Or holds it, waiting for the line it would refuse.
      (oursRefused(o, t, /bad request line|bad method|bare LF/) || (o.verdict === 'partial' && t.verdict === 'complete' && /^[\r\n]+$/.test(messageAt(input, o)))) &&
      /^(\r\n)*(\n|\r(?!\n))/.test(messageAt(input, o)),
  },
  {
    what: 'an absolute-form target whose scheme has digits, `+`, `-` or `.` is taken (llhttp takes letters only)',
    why: 'RFC 3986 3.1: "scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )"; the router matches the authority, whatever the scheme',
    explains: (input, o, t) => theirsRefused(o, t, ['HPE_INVALID_URL']) && /^\S+ [A-Za-z][A-Za-z0-9+.-]*[0-9+.-][A-Za-z0-9+.-]*:\/\//.test(requestLine(input, t)),
  },
  {
    what: 'an Upgrade the router does not take (on HTTP/1.0, on a request with a body, to h2c) is ignored: the request is served as the plain one it also is, and the connection stays HTTP/1.1 (llhttp marks it upgraded)',
    why: 'RFC 9110 7.8: "A server MAY ignore a received Upgrade header field if it wishes to continue using the current protocol on that connection", and "MUST ignore an Upgrade header field that is received in an HTTP/1.0 request"; h2c cannot be carried through a proxy (HTTP2-Settings is hop-by-hop)',
    explains: (_, o, t) => {
      // llhttp stops at the request it takes as upgraded: after its head when chunked, after its body by Content-Length.
      const last = t.messages.at(-1);
      const i = last?.upgrade === true ? t.messages.length - 1 : t.messages.length;
      const b = last?.upgrade === true ? last : t.pending;
      const a = o.messages[i] ?? o.pending;
      if (a === undefined || b === undefined || a.upgrade || !b.upgrade) return false;
      if (divergence({ messages: o.messages.slice(0, i), verdict: 'complete' }, { messages: t.messages.slice(0, i), verdict: 'complete' }) !== undefined) return false;
      if (a.start !== b.start || a.target !== b.target || a.version !== b.version || JSON.stringify(a.headers) !== JSON.stringify(b.headers)) return false;
      const header = (name: string) => {
        const j = a.headers.findIndex((h, k) => k % 2 === 0 && h.toLowerCase() === name);
        return j === -1 ? undefined : a.headers[j + 1];
      };
      const hasBody = Number(header('content-length') ?? 0) > 0 || header('transfer-encoding') !== undefined;
      return a.version === '1.0' || hasBody || header('upgrade')?.toLowerCase() === 'h2c';
    },
  },
  ...framingDifferences(ours, (bytes) => llhttpParse('request', bytes), () => KNOWN),
];

const requests = fc.record({
  drafts: fc.array(requestDraft, { minLength: 1, maxLength: 3 }),
  mutations: fc.array(mutation, { maxLength: 2 }),
  cuts: fc.array(fc.nat(), { maxLength: 8 }),
});

describe('RequestParser against llhttp', () => {
  it('reads generated and mutated requests as llhttp does, but for the known differences', (t) => {
    const params = fuzzParameters(2000);
    t.diagnostic(`seed ${params.seed}, ${params.numRuns} runs`);
    fc.assert(
      fc.property(requests, ({ drafts, mutations, cuts }) => {
        let text = serialize(drafts);
        for (const m of mutations) text = mutate(text, m);
        const input = Buffer.from(text, 'latin1');
        const mine = ours(segments(input, cuts));
        const theirs = llhttpParse('request', input);
        const wrong = judge(text, mine, theirs, KNOWN, (more) => ours([input, Buffer.from(more, 'latin1')]));
        if (wrong !== undefined) throw new Error(`${wrong}\ninput: ${JSON.stringify(text)}`);
        // However the bytes arrive, the router reads the same.
        // (Which fault a refusal names may differ: a bare LF is noticed before the head's end arrives.)
        const whole = ours([input]);
        const a = JSON.stringify([whole.messages, whole.verdict]);
        const b = JSON.stringify([mine.messages, mine.verdict]);
        if (a !== b) throw new Error(`read differently in one piece: ${a}\nvs ${b}\ninput: ${JSON.stringify(text)}`);
      }),
      params,
    );
  });

  it('reads a request after one whose head it remembers as a fresh parser does, when the head repeats and when it is changed where framing lives', (t) => {
    const params = fuzzParameters(1000);
    t.diagnostic(`seed ${params.seed}, ${params.numRuns} runs`);
    fc.assert(
      fc.property(requestDraft, fc.array(mutation, { maxLength: 2 }), (draft, mutations) => {
        const first = Buffer.from(serialize([draft]), 'latin1');
        let text = first.toString('latin1');
        for (const m of mutations) text = mutate(text, m);
        const input = Buffer.from(text, 'latin1');
        let primed: Outcome;
        try {
          primed = ours([input], first);
        } catch (err) {
          fc.pre(!(err instanceof FlintError) && !String(err).includes('primer'));
          throw err;
        }
        const fresh = ours([input]);
        const a = JSON.stringify([primed.messages, primed.verdict, primed.error]);
        const b = JSON.stringify([fresh.messages, fresh.verdict, fresh.error]);
        if (a !== b) throw new Error(`read differently after a remembered head: ${a}\nvs ${b}\nfirst: ${JSON.stringify(first.toString('latin1'))}\ninput: ${JSON.stringify(text)}`);
      }),
      params,
    );
  });
});
