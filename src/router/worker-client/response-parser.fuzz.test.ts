// Differential fuzzing of the worker client's response parser against llhttp
// (node:http's parser), as DESIGN.md section 7 asks of an owned edge parser:
// generated responses (Content-Length, chunked with extensions and trailers,
// read until close, 204 and 304, answers to HEAD), well-formed and mutated
// where framing lives, cut into random reads, must be read alike by both
// (status, headers, body, where the response ends, whether the connection
// may carry another request) or refused by both, unless the table below
// names the difference and the RFC's reason for it.
//
// Only the first final response is compared: the router sends one request at
// a time, and bytes after its response make it drop the connection.
//
// Seed 42 unless FLINT_FUZZ_SEED says otherwise (a number, or `random`), and
// FLINT_FUZZ_RUNS runs; a failure prints the seed and path to replay it.
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  framingDifferences,
  fuzzParameters,
  judge,
  type KnownDifference,
  llhttpParse,
  type Message,
  mutate,
  mutation,
  type Outcome,
  oursRefused,
  responseDraft,
  segments,
  serialize,
  theirsRefused,
} from '../testing/http-fuzz.ts';
import { UpstreamError } from './errors.ts';
import { ResponseParser } from './response-parser.ts';

/**
 * The router's parser, fed the reads given and then the connection's close.
 * `byByte` feeds one byte at a time, to learn after which the response ends.
 */
function ours(reads: Buffer[], noBody: boolean, byByte = false, upgrade = false, primer?: Buffer): Outcome {
  const messages: Message[] = [];
  let current: Message | undefined;
  let switched = false;
  const parser = new ResponseParser({
    onHead(status: number, headers: readonly string[]) {
      current = { start: String(status), target: '', version: '1.1', headers: [...headers], body: '', end: -1, keepAlive: true, upgrade: false };
    },
    onBody(chunk: Buffer) {
      if (current !== undefined) current.body += chunk.toString('latin1');
      return true;
    },
    onEnd() {},
    onUpgrade(headers: readonly string[]) {
      current = { start: '101', target: '', version: '1.1', headers: [...headers], body: '', end: -1, keepAlive: false, upgrade: true };
      switched = true;
    },
  });
  if (primer !== undefined) {
    // An earlier response on the same connection, whose head the parser remembers.
    parser.start(false);
    parser.execute(primer);
    if (!parser.done || switched) throw new Error('the primer is not one whole response');
    current = undefined;
  }
  parser.start(noBody, upgrade);
  let fed = 0;
  const ended = (): Outcome => {
    const m = current as Message;
    m.end = byByte ? fed : -1;
    m.keepAlive = parser.keepAlive;
    messages.push(m);
    return { messages, verdict: 'complete' };
  };
  try {
    for (const read of reads) {
      const pieces = byByte ? Array.from(read, (_, i) => read.subarray(i, i + 1)) : [read];
      for (const piece of pieces) {
        parser.execute(piece);
        fed += piece.length;
        // Before any byte after it: those would mark the connection unfit for reuse.
        if (parser.done || switched) return ended();
      }
    }
    if (parser.finishOnClose()) return ended();
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    return { messages, verdict: 'error', error: err.message, pending: current };
  }
  return { messages, verdict: 'partial', pending: current };
}

/** llhttp as node:http's client drives it: one response, to HEAD or not, then the close. */
function theirs(input: Buffer, noBody: boolean): Outcome {
  return llhttpParse('response', input, { noBody, eof: true, firstFinal: true });
}

/** The final response's text: past any interim (1xx but 101) heads before it. */
function finalResponse(input: string): string {
  let rest = input;
  while (/^HTTP\/1\.[01] 1(?!01)\d\d/.test(rest)) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) break;
    rest = rest.slice(end + 4);
  }
  return rest;
}

/** The final response's status line. */
function statusLine(input: string): string {
  const rest = finalResponse(input);
  const eol = rest.indexOf('\r\n');
  return eol === -1 ? rest : rest.slice(0, eol);
}

/** Every Content-Length value in the final response's head, list members apart. */
function contentLengths(input: string): string[] {
  const rest = finalResponse(input);
  const end = rest.indexOf('\r\n\r\n');
  const head = end === -1 ? rest : rest.slice(0, end + 2);
  return [...head.matchAll(/\r\ncontent-length:([^\r\n]*)/gi)].flatMap((m) => m[1].split(',').map((v) => v.trim()));
}

/** Headers with the first Content-Length as a plain number and any repeat of it dropped. */
function plainLengths(headers: string[]): string {
  const out: string[] = [];
  let seen = false;
  for (let i = 0; i < headers.length; i += 2) {
    if (!/^content-length$/i.test(headers[i])) out.push(headers[i], headers[i + 1]);
    else if (!seen) {
      seen = true;
      out.push(headers[i], String(Number(headers[i + 1].split(',')[0])));
    }
  }
  return JSON.stringify(out);
}

function knownDifferences(noBody: boolean, upgrade: boolean): KnownDifference[] {
  const table: KnownDifference[] = [
    {
      what: 'repeated Content-Length fields or list members of one value are taken as that value (llhttp refuses any repeat)',
      why: 'RFC 9110 8.6: a recipient of "Content-Length: 42, 42" or repeated identical fields "MAY either reject the message as invalid or replace that invalid field value with a single instance of the decimal value"; different values are refused by both',
      explains: (input, o, t) => {
        const values = contentLengths(input);
        return theirsRefused(o, t, ['HPE_UNEXPECTED_CONTENT_LENGTH', 'HPE_INVALID_CONTENT_LENGTH']) && values.length > 1 && new Set(values.map(Number)).size === 1 && values.every((v) => /^\d+$/.test(v));
      },
    },
    {
      what: 'Content-Length is passed on as one plain number (leading zeros dropped, repeats folded into one)',
      why: 'RFC 9110 8.6: Content-Length is a decimal number; the router re-frames the body it forwards and passes on a value any client reads alike',
      explains: (_, o, t) => {
        const a = o.messages[0];
        const b = t.messages[0];
        if (a === undefined || b === undefined || o.messages.length !== 1 || t.messages.length !== 1 || o.verdict !== t.verdict) return false;
        return plainLengths(a.headers) === plainLengths(b.headers) && a.body === b.body && a.end === b.end && a.keepAlive === b.keepAlive && a.start === b.start;
      },
    },
    {
      what: 'a 204 or 304 (or an answer to HEAD) ends at its head whatever framing headers it has; llhttp refuses conflicting ones',
      why: 'RFC 9112 6.3: a response to HEAD and any 1xx, 204 or 304 response "is always terminated by the first empty line after the header fields, regardless of the header fields present"',
      explains: (input, o, t) =>
        theirsRefused(o, t, ['HPE_UNEXPECTED_CONTENT_LENGTH', 'HPE_INVALID_CONTENT_LENGTH', 'HPE_INVALID_TRANSFER_ENCODING']) && (noBody || / (204|304)( |$)/.test(statusLine(input))),
    },
    {
      what: 'an answer to HEAD without Content-Length or Transfer-Encoding leaves the connection fit for reuse (llhttp says close: it decides before node:http tells it the request was HEAD)',
      why: 'RFC 9112 6.3: a response to HEAD "is always terminated by the first empty line after the header fields", so it needs no close to end',
      explains: (_, o, t) => {
        const a = o.messages[0];
        const b = t.messages[0];
        return noBody && a !== undefined && b !== undefined && a.keepAlive && !b.keepAlive && JSON.stringify({ ...a, keepAlive: false, version: '' }) === JSON.stringify({ ...b, version: '' });
      },
    },
    {
      what: 'no answer to a request that asked to upgrade leaves the connection for reuse: after a 101 it is the other protocol\'s (llhttp says keep-alive when the 101 has no Connection: upgrade), and after an ordinary answer it may be lost to HTTP',
      why: 'RFC 9110 15.2.2: after a 101 the server switches "immediately after the empty line that terminates the 101 response"; RFC 9112 9.3 lets either side close at any time, and an instance that declined to switch may have taken the socket from its HTTP parser all the same (node:http does once it listens for upgrades)',
      explains: (_, o, t) => {
        const a = o.messages[0];
        const b = t.messages[0];
        const same = (m: Message) => JSON.stringify({ ...m, keepAlive: true, version: '', headers: plainLengths(m.headers) });
        return upgrade && a !== undefined && b !== undefined && !a.keepAlive && b.keepAlive && same(a) === same(b);
      },
    },
    {
      what: 'a 101 to a request that asked to upgrade switches whatever its headers say; llhttp switches only when it has Connection: upgrade and Upgrade, and would read on as HTTP',
      why: 'RFC 9110 15.2.2: the server switches "immediately after the empty line that terminates the 101 response"; nothing after a 101 is HTTP, so none of it is read as a response',
      explains: (_, o, t) => {
        const a = o.messages[0];
        const b = t.messages[0];
        return upgrade && a !== undefined && b !== undefined && a.start === '101' && a.upgrade && !b.upgrade && a.end === b.end && JSON.stringify(a.headers) === JSON.stringify(b.headers);
      },
    },
    {
      what: 'an HTTP/1.0 interim (1xx) response is skipped like any other (llhttp takes it as the last on the connection, and refuses what follows)',
      why: 'RFC 9110 15.2: "A client MUST be able to parse one or more 1xx responses received prior to a final response, even if the client does not expect one"',
      explains: (input, o, t) => theirsRefused(o, t, ['HPE_CLOSED_CONNECTION']) && /^HTTP\/1\.0 1\d\d/.test(input),
    },
    {
      what: 'a 101 to a request that did not ask to upgrade is refused (llhttp hands the connection over)',
      why: 'RFC 9110 15.2.2: a server "MUST NOT switch to a protocol that was not indicated by the client in the corresponding request\'s Upgrade header field"',
      explains: (_, o, t) => oursRefused(o, t, /101 Switching Protocols to a request that did not ask to upgrade/),
    },
    {
      what: 'a Transfer-Encoding other than exactly chunked is refused (llhttp reads such a body until the close)',
      why: 'RFC 9112 6.1 lets a recipient refuse a transfer coding it does not implement; the router forwards bodies re-framed, so a coded body would go on without the coding that tells how to read it, and a proxy answers a response it cannot frame with 502 (RFC 9112 6.3)',
      explains: (_, o, t) => oursRefused(o, t, /a Transfer-Encoding other than chunked/),
    },
    {
      what: 'Transfer-Encoding in an HTTP/1.0 response is refused (llhttp reads it chunked, and keeps the connection)',
      why: 'RFC 9112 6.1: "A server or client that receives an HTTP/1.0 message containing a Transfer-Encoding header field MUST treat the message as if the framing is faulty, even if a Content-Length is present, and close the connection"',
      explains: (_, o, t) => oursRefused(o, t, /Transfer-Encoding in an HTTP\/1\.0 response/),
    },
    {
      what: 'a status code below 100 is refused',
      why: 'RFC 9110 15: "All valid status codes are within the range of 100 to 599, inclusive"; the router answers the codes it cannot make sense of with 502, and above 599 it passes them on as RFC 9110 15 asks of unrecognised codes',
      explains: (input, o, t) => oursRefused(o, t, /bad status line/) && /^HTTP\/1\.[01] 0\d\d( |$)/.test(statusLine(input)),
    },
    {
      what: 'empty lines before the status line are refused (llhttp skips them)',
      why: 'RFC 9112 2.2 allows ignoring empty lines only before a request line; the router reads one response per request, and anything before it is a fault',
      explains: (input, o, t) => oursRefused(o, t, /bad status line|bare LF/) && /^[\r\n]/.test(finalResponse(input)),
    },
    {
      what: 'versions other than HTTP/1.0 and HTTP/1.1, or a status line not of the form `HTTP/1.x NNN[ reason]`, are refused (llhttp reads HTTP/2.0 and others)',
      why: 'RFC 9112 4: status-line = HTTP-version SP status-code SP [ reason-phrase ]; the router talks HTTP/1.1 to instances and does not guess at what else an answer might be',
      explains: (input, o, t) => oursRefused(o, t, /bad status line/) && !/^HTTP\/1\.[01] \d{3}( |$)/.test(statusLine(input)),
    },
    ...framingDifferences(
      (reads) => ours(reads, noBody, true, upgrade),
      (input) => theirs(input, noBody),
      () => table,
    ),
  ];
  return table;
}

/** A 101 to a request that asked to upgrade, and the other protocol's first bytes after it. */
const SWITCH = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x02hi';

const responses = fc.record({
  draft: responseDraft,
  head: fc.oneof({ weight: 6, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  upgrade: fc.oneof({ weight: 6, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  switching: fc.boolean(),
  interim: fc.constantFrom('', '', '', 'HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n'),
  mutations: fc.array(mutation, { maxLength: 2 }),
  cuts: fc.array(fc.nat(), { maxLength: 8 }),
});

const TABLES: Record<string, KnownDifference[]> = {
  'true-true': knownDifferences(true, true),
  'true-false': knownDifferences(true, false),
  'false-true': knownDifferences(false, true),
  'false-false': knownDifferences(false, false),
};

describe('ResponseParser against llhttp', () => {
  it('reads generated and mutated responses as llhttp does, but for the known differences', (t) => {
    const params = fuzzParameters(2000);
    t.diagnostic(`seed ${params.seed}, ${params.numRuns} runs`);
    fc.assert(
      fc.property(responses, ({ draft, head, upgrade, switching, interim, mutations, cuts }) => {
        let text = upgrade && switching ? SWITCH : interim + serialize([draft]);
        for (const m of mutations) text = mutate(text, m);
        const input = Buffer.from(text, 'latin1');
        const mine = ours([input], head, true, upgrade);
        const wrong = judge(
          text,
          mine,
          theirs(input, head),
          TABLES[`${head}-${upgrade}`],
          (more) => ours([input, Buffer.from(more, 'latin1')], head, true, upgrade),
          // The parser does not tell the version: what it means for reuse is compared (keepAlive).
          ['version'],
        );
        if (wrong !== undefined) throw new Error(`${wrong}\ninput: ${JSON.stringify(text)}${head ? ' (to HEAD)' : ''}${upgrade ? ' (to an upgrade)' : ''}`);
        // However the bytes arrive, the router reads the same.
        const split = ours(segments(input, cuts), head, false, upgrade);
        // (Bytes after the response, read with it, also mark the connection unfit for reuse.)
        const a = JSON.stringify([split.messages.map((m) => ({ ...m, end: -1, keepAlive: false })), split.verdict]);
        const b = JSON.stringify([mine.messages.map((m) => ({ ...m, end: -1, keepAlive: false })), mine.verdict]);
        if (a !== b) throw new Error(`read differently in other reads: ${a}\nvs ${b}\ninput: ${JSON.stringify(text)}`);
      }),
      params,
    );
  });

  it('reads a response after one whose head it remembers as a fresh parser does, when the head repeats and when it is changed where framing lives', (t) => {
    const params = fuzzParameters(1000);
    t.diagnostic(`seed ${params.seed}, ${params.numRuns} runs`);
    fc.assert(
      fc.property(responseDraft, fc.array(mutation, { maxLength: 2 }), fc.boolean(), fc.boolean(), (draft, mutations, head, upgrade) => {
        const first = Buffer.from(serialize([draft]), 'latin1');
        let primed: Outcome;
        let text = first.toString('latin1');
        for (const m of mutations) text = mutate(text, m);
        const input = Buffer.from(text, 'latin1');
        try {
          primed = ours([input], head, false, upgrade, first);
        } catch (err) {
          fc.pre(!(err instanceof UpstreamError) && !String(err).includes('primer'));
          throw err;
        }
        const fresh = ours([input], head, false, upgrade);
        const a = JSON.stringify([primed.messages, primed.verdict, primed.error]);
        const b = JSON.stringify([fresh.messages, fresh.verdict, fresh.error]);
        if (a !== b) throw new Error(`read differently after a remembered head: ${a}\nvs ${b}\nfirst: ${JSON.stringify(first.toString('latin1'))}\ninput: ${JSON.stringify(text)}`);
      }),
      params,
    );
  });
});
