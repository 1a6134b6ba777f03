// Differential fuzzing of the router's own HTTP/1.1 parsers against llhttp,
// the parser inside node:http (DESIGN.md section 7): generated messages,
// well-formed and then mutated where framing lives, are read by both, and
// what each makes of them is set side by side. Shared by
// http1/request-parser.fuzz.test.ts and worker-client/response-parser.fuzz.test.ts.
import { createRequire } from 'node:module';
import fc from 'fast-check';

// ---- llhttp, in process ----------------------------------------------------------

/** The binding node:http drives; not in @types/node, so described here as far as it is used. */
interface LlhttpParser {
  initialize(type: number, resource: object, maxHeaderSize?: number, lenient?: number): void;
  execute(data: Buffer): number | (Error & { code?: string });
  finish(): undefined | (Error & { code?: string });
  close(): void;
  [callback: number]: (...args: any[]) => unknown;
}

interface LlhttpBinding {
  HTTPParser: {
    new (): LlhttpParser;
    REQUEST: number;
    RESPONSE: number;
    kOnMessageBegin: number;
    kOnHeaders: number;
    kOnHeadersComplete: number;
    kOnBody: number;
    kOnMessageComplete: number;
    kLenientNone: number;
  };
  methods: string[];
}

// `_http_common` is what node:http itself loads the parser from; Node 24 prints
// no deprecation warning for it (checked with --pending-deprecation).
const llhttp = createRequire(import.meta.url)('_http_common') as LlhttpBinding;
const { HTTPParser } = llhttp;

/** The methods node:http names (llhttp knows a few more, QUERY among them); llhttp refuses other tokens. */
export const LLHTTP_METHODS: readonly string[] = llhttp.methods;

/** What a parser made of one message. */
export interface Message {
  /** Request: the method; response: the status code. */
  start: string;
  /** Request: the target as sent; response: unused (''). */
  target: string;
  /** `1.0` or `1.1`, or what else llhttp read (`0.9` for a request line without a version, `2.0`). */
  version: string;
  /** Name/value pairs as sent. */
  headers: string[];
  /** The body, latin1. */
  body: string;
  /** Offset just past the message's last byte in the input. */
  end: number;
  keepAlive: boolean;
  upgrade: boolean;
}

/** What a parser made of a whole input. */
export interface Outcome {
  messages: Message[];
  /** Refused (with why), read to a message boundary, or stopped inside a message waiting for more. */
  verdict: 'error' | 'complete' | 'partial';
  error?: string;
  /** A message whose head was read but not yet its end. */
  pending?: Message;
}

/** Larger than any head the generators make, so llhttp's 16 KiB default never decides. */
const LLHTTP_MAX_HEAD = 1024 * 1024;

/**
 * llhttp in its default strict mode, as node:http's server and client use it,
 * fed one byte at a time: the only way to learn after which byte a message
 * ends through this binding.
 */
export function llhttpParse(kind: 'request' | 'response', input: Buffer, opts: { noBody?: boolean; eof?: boolean; firstFinal?: boolean } = {}): Outcome {
  const p = new HTTPParser();
  p.initialize(kind === 'request' ? HTTPParser.REQUEST : HTTPParser.RESPONSE, {}, LLHTTP_MAX_HEAD, HTTPParser.kLenientNone);
  const messages: Message[] = [];
  let pendingHeaders: string[] = [];
  let pendingUrl = '';
  let current: Message | undefined;
  let offset = 0;
  let begin = 0;
  let stop = false;
  let inTrailers = false;
  let begun = false;
  p[HTTPParser.kOnMessageBegin] = () => {
    begun = true;
    pendingHeaders = [];
    pendingUrl = '';
    begin = offset;
    inTrailers = false;
  };
  // Headers arrive here when node flushes them before the head is complete,
  // and trailers after the body (the router drops those: not compared).
  p[HTTPParser.kOnHeaders] = (headers: string[], url: string) => {
    if (inTrailers) return;
    pendingHeaders.push(...headers);
    pendingUrl += url;
  };
  p[HTTPParser.kOnHeadersComplete] = (
    major: number,
    minor: number,
    headers: string[] | undefined,
    method: number | undefined,
    url: string | undefined,
    status: number | undefined,
    _reason: string | undefined,
    upgrade: boolean,
    keepAlive: boolean,
  ) => {
    const all = headers === undefined ? [...pendingHeaders] : [...pendingHeaders, ...headers];
    inTrailers = true;
    current = {
      // Node's list lacks some methods llhttp knows (QUERY): then as sent.
      start: kind === 'request' ? (llhttp.methods[method ?? -1] ?? input.toString('latin1', begin, input.indexOf(0x20, begin))) : String(status),
      target: kind === 'request' ? pendingUrl + (url ?? '') : '',
      version: `${major}.${minor}`,
      headers: all,
      body: '',
      end: -1,
      keepAlive,
      upgrade,
    };
    // node:http's client tells llhttp a response to HEAD has no body this way.
    return opts.noBody === true && kind === 'response' ? 1 : 0;
  };
  p[HTTPParser.kOnBody] = (chunk: Buffer) => {
    if (current !== undefined) current.body += chunk.toString('latin1');
  };
  p[HTTPParser.kOnMessageComplete] = () => {
    begun = false;
    if (current === undefined) return;
    current.end = offset + 1;
    // The router skips interim responses: only the final one is compared.
    if (opts.firstFinal === true && current.start.startsWith('1') && current.start !== '101') {
      current = undefined;
      return;
    }
    messages.push(current);
    if (!current.keepAlive || current.upgrade || opts.firstFinal === true) stop = true;
    current = undefined;
  };
  try {
    for (; offset < input.length && !stop; offset++) {
      const r = p.execute(input.subarray(offset, offset + 1));
      if (r instanceof Error) return { messages, verdict: 'error', error: r.code };
    }
    if (opts.eof === true && !stop) {
      offset = input.length - 1;
      const r = p.finish();
      // A message cut short by the close: what the router's parser calls waiting for more.
      if (r instanceof Error) return { messages, verdict: r.code === 'HPE_INVALID_EOF_STATE' ? 'partial' : 'error', error: r.code };
    }
    // A close before any final response is one cut short, as the router sees it.
    if (opts.eof === true && opts.firstFinal === true && messages.length === 0) return { messages, verdict: 'partial' };
    return { messages, verdict: begun ? 'partial' : 'complete', pending: current };
  } finally {
    p.close();
  }
}

// ---- generated messages ------------------------------------------------------------

/** A message as the generators build it, before it is turned into bytes and mutated. */
export interface Draft {
  /** The request line or status line, without its CRLF. */
  startLine: string;
  headers: Array<[string, string]>;
  /** The body bytes as they go on the wire (already chunked when chunked). */
  body: string;
}

export function serialize(drafts: Draft[]): string {
  let s = '';
  for (const d of drafts) {
    s += `${d.startLine}\r\n`;
    for (const [n, v] of d.headers) s += `${n}: ${v}\r\n`;
    s += `\r\n${d.body}`;
  }
  return s;
}

const TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const tokenChar = fc.constantFrom(...TOKEN_CHARS);
const token: fc.Arbitrary<string> = fc.string({ unit: tokenChar, minLength: 1, maxLength: 12 });

/** A field value: visible ASCII, obs-text, and inner spaces and tabs. */
const valueChar = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0x21, max: 0x7e }) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }) },
  { weight: 1, arbitrary: fc.constantFrom(0x20, 0x09) },
);
const fieldValue: fc.Arbitrary<string> = fc
  .array(valueChar, { maxLength: 24 })
  .map((cs) => String.fromCharCode(...cs).replace(/^[ \t]+|[ \t]+$/g, ''));

const extraHeaders = fc.array(
  fc.tuple(
    fc.oneof(token, fc.constantFrom('Accept', 'User-Agent', 'X-Request-Id', 'Cookie', 'Cache-Control', 'Content-Type')),
    fieldValue,
  ),
  { maxLength: 5 },
);

/** `chunked` encoding of `body` in the given chunk sizes, with extensions and trailers. */
function chunk(body: string, sizes: number[], exts: string[], trailers: Array<[string, string]>, upperHex: boolean): string {
  let out = '';
  let pos = 0;
  let i = 0;
  while (pos < body.length) {
    const n = Math.min(Math.max(1, sizes[i % Math.max(1, sizes.length)] ?? body.length), body.length - pos);
    const hex = upperHex ? n.toString(16).toUpperCase() : n.toString(16);
    out += `${hex}${exts[i % Math.max(1, exts.length)] ?? ''}\r\n${body.slice(pos, pos + n)}\r\n`;
    pos += n;
    i++;
  }
  out += `0${exts[0] ?? ''}\r\n`;
  for (const [n, v] of trailers) out += `${n}: ${v}\r\n`;
  return `${out}\r\n`;
}

const chunkExt = fc.oneof(
  fc.constant(''),
  token.map((n) => `;${n}`),
  fc.tuple(token, token).map(([n, v]) => `;${n}=${v}`),
  fc.tuple(token, fc.string({ unit: fc.constantFrom('a', ' ', '\\"', ';', '=', '\t', 'é'), maxLength: 6 })).map(([n, v]) => `;${n}="${v}"`),
);

type Framing = { kind: 'none' } | { kind: 'length'; body: string } | { kind: 'chunked'; body: string; wire: string };

const bodyText = fc.string({ unit: fc.integer({ min: 0, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 40 });

const framing: fc.Arbitrary<Framing> = fc.oneof(
  { weight: 2, arbitrary: fc.constant<Framing>({ kind: 'none' }) },
  { weight: 3, arbitrary: bodyText.map<Framing>((body) => ({ kind: 'length', body })) },
  {
    weight: 3,
    arbitrary: fc
      .record({
        body: bodyText,
        sizes: fc.array(fc.integer({ min: 1, max: 20 }), { maxLength: 4 }),
        exts: fc.array(chunkExt, { maxLength: 3 }),
        trailers: fc.array(fc.tuple(token, fieldValue), { maxLength: 2 }),
        upperHex: fc.boolean(),
      })
      .map<Framing>(({ body, sizes, exts, trailers, upperHex }) => ({ kind: 'chunked', body, wire: chunk(body, sizes, exts, trailers, upperHex) })),
  },
);

/** Puts the framing's headers among `headers` at a generated place, and returns the body's wire bytes. */
function frame(f: Framing, headers: Array<[string, string]>, at: number, lengthName: string, teName: string): string {
  if (f.kind === 'none') return '';
  const h: [string, string] = f.kind === 'length' ? [lengthName, String(f.body.length)] : [teName, 'chunked'];
  headers.splice(at % (headers.length + 1), 0, h);
  return f.kind === 'length' ? f.body : f.wire;
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'];

const target = fc.oneof(
  { weight: 6, arbitrary: fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)) },
  { weight: 2, arbitrary: fc.tuple(fc.webPath(), fc.webQueryParameters()).map(([p, q]) => `${p.startsWith('/') ? p : `/${p}`}?${q}`) },
  { weight: 2, arbitrary: fc.webUrl({ withQueryParameters: true }).filter((u) => u.startsWith('http')) },
  { weight: 1, arbitrary: fc.constant('*') },
);

export const requestDraft: fc.Arbitrary<Draft> = fc
  .record({
    method: fc.constantFrom(...METHODS),
    target,
    http10: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    host: fc.domain(),
    hostCase: fc.constantFrom('Host', 'host', 'HOST'),
    extra: extraHeaders,
    connection: fc.constantFrom(undefined, 'keep-alive', 'close', 'Keep-Alive', 'TE', 'Upgrade', 'keep-alive, Upgrade'),
    upgrade: fc.constantFrom(undefined, 'websocket', 'h2c', 'foo/2'),
    expect: fc.boolean(),
    framing,
    at: fc.nat(),
    lengthName: fc.constantFrom('Content-Length', 'content-length', 'CONTENT-LENGTH'),
    teName: fc.constantFrom('Transfer-Encoding', 'transfer-encoding'),
  })
  .map(({ method, target, http10, host, hostCase, extra, connection, upgrade, expect, framing: f, at, lengthName, teName }) => {
    const headers: Array<[string, string]> = [[hostCase, host], ...extra];
    if (connection !== undefined) headers.push(['Connection', connection]);
    if (upgrade !== undefined) headers.push(['Upgrade', upgrade]);
    // A chunked body on HTTP/1.0 is a framing fault, not a well-formed message.
    const fr: Framing = http10 && f.kind === 'chunked' ? { kind: 'length', body: f.body } : f;
    if (expect && fr.kind !== 'none' && !http10) headers.push(['Expect', '100-continue']);
    const body = frame(fr, headers, at, lengthName, teName);
    return { startLine: `${method} ${target} HTTP/1.${http10 ? 0 : 1}`, headers, body };
  });

const REASONS: Record<number, string> = { 200: 'OK', 201: 'Created', 204: 'No Content', 301: 'Moved Permanently', 304: 'Not Modified', 400: 'Bad Request', 404: 'Not Found', 500: 'Internal Server Error', 502: 'Bad Gateway' };

export const responseDraft: fc.Arbitrary<Draft> = fc
  .record({
    status: fc.constantFrom(200, 200, 201, 204, 301, 304, 400, 404, 418, 500, 502, 599),
    http10: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    reason: fc.oneof(fc.constant(undefined), fc.constant(''), fieldValue),
    extra: extraHeaders,
    connection: fc.constantFrom(undefined, 'keep-alive', 'close'),
    keepAliveHint: fc.option(fc.integer({ min: 1, max: 120 }), { nil: undefined }),
    framing: fc.oneof({ weight: 6, arbitrary: framing }, { weight: 1, arbitrary: fc.constant<Framing | 'close'>('close') }),
    closeBody: bodyText,
    at: fc.nat(),
    lengthName: fc.constantFrom('Content-Length', 'content-length'),
    teName: fc.constantFrom('Transfer-Encoding', 'transfer-encoding'),
  })
  .map(({ status, http10, reason, extra, connection, keepAliveHint, framing: f, closeBody, at, lengthName, teName }) => {
    const headers: Array<[string, string]> = [...extra];
    if (connection !== undefined) headers.push(['Connection', connection]);
    if (keepAliveHint !== undefined) headers.push(['Keep-Alive', `timeout=${keepAliveHint}`]);
    const noBody = status === 204 || status === 304;
    let body: string;
    if (f === 'close') {
      // Read until the connection closes: nothing may follow it.
      body = noBody ? '' : closeBody;
    } else {
      const fr: Framing = http10 && f.kind === 'chunked' ? { kind: 'length', body: f.body } : f;
      body = frame(fr, headers, at, lengthName, teName);
      if (noBody) body = '';
    }
    const r = reason ?? REASONS[status] ?? 'Whatever';
    return { startLine: `HTTP/1.${http10 ? 0 : 1} ${status}${reason === '' ? '' : ` ${r}`}`, headers, body };
  });

// ---- mutations ---------------------------------------------------------------------

/** A change to a message's bytes: `at` picks a place, `pick` a variant. */
export interface Mutation {
  kind: MutationKind;
  at: number;
  pick: number;
}

const MUTATION_KINDS = [
  'flip-structural',
  'flip-any',
  'bare-lf',
  'bare-cr',
  'obs-fold',
  'duplicate-length',
  'length-and-chunked',
  'bad-length',
  'bad-chunk-size',
  'huge-size',
  'nul',
  'space-before-colon',
  'bad-token',
  'bad-version',
  'bad-start',
  'transfer-coding',
  'delete-byte',
  'insert-byte',
  'truncate',
  'leading-empty-line',
  'host',
  'whitespace',
] as const;
type MutationKind = (typeof MUTATION_KINDS)[number];

export const mutation: fc.Arbitrary<Mutation> = fc.record({ kind: fc.constantFrom(...MUTATION_KINDS), at: fc.nat(), pick: fc.nat() });

function pickOf<T>(items: readonly T[], n: number): T {
  return items[n % items.length];
}

/** Indexes of every match of `re` in `s`. */
function places(s: string, re: RegExp): number[] {
  const out: number[] = [];
  for (const m of s.matchAll(re)) out.push(m.index);
  return out;
}

function splice(s: string, at: number, del: number, ins: string): string {
  return s.slice(0, at) + ins + s.slice(at + del);
}

/** Replaces one match of `re` (chosen by `at`) through `f`; the text unchanged when nothing matches. */
function replaceOne(s: string, re: RegExp, at: number, f: (m: RegExpExecArray) => string): string {
  const ms = [...s.matchAll(re)];
  if (ms.length === 0) return s;
  const m = ms[at % ms.length];
  return splice(s, m.index, m[0].length, f(m));
}

/** Applies a mutation to wire text (latin1). */
export function mutate(s: string, m: Mutation): string {
  const { at, pick } = m;
  switch (m.kind) {
    case 'flip-structural': {
      const ps = places(s, /[\r\n: ;=/.\d]/g);
      if (ps.length === 0) return s;
      const p = ps[at % ps.length];
      return splice(s, p, 1, String.fromCharCode(pickOf([0x00, 0x09, 0x0a, 0x0d, 0x20, 0x3a, 0x3b, 0x30, 0x7f, 0xff, s.charCodeAt(p) ^ 0x20, s.charCodeAt(p) ^ 1], pick)));
    }
    case 'flip-any':
      return s.length === 0 ? s : splice(s, at % s.length, 1, String.fromCharCode(s.charCodeAt(at % s.length) ^ (1 << pick % 8)));
    case 'bare-lf':
      return replaceOne(s, /\r\n/g, at, () => '\n');
    case 'bare-cr':
      return replaceOne(s, /\r\n/g, at, () => pickOf(['\r', '\r\r\n', 'a\rb\r\n'], pick));
    case 'obs-fold':
      return replaceOne(s, /\r\n(?=[!-~])/g, at, () => pickOf(['\r\n folded', '\r\n\tfolded', '\r\n ', '\r\n  x: y'], pick));
    case 'duplicate-length':
      return replaceOne(s, /\r\n(content-length: *(\d+))\r\n/gi, at, (x) => `\r\n${x[1]}\r\n${pickOf([x[1], `Content-Length: ${Number(x[2]) + 1}`, `Content-Length: ${x[2]}, ${x[2]}`, `Content-Length: ${x[2]},${Number(x[2]) + 1}`], pick)}\r\n`);
    case 'length-and-chunked':
      return replaceOne(s, /\r\n(content-length: *\d+|transfer-encoding: *chunked)\r\n/gi, at, (x) =>
        `\r\n${x[1]}\r\n${/^c/i.test(x[1]) ? 'Transfer-Encoding: chunked' : `Content-Length: ${pick % 7}`}\r\n`,
      );
    case 'bad-length':
      return replaceOne(s, /(content-length: *)(\d+)/gi, at, (x) =>
        x[1] + pickOf(['', '-1', '+5', '0x10', `${x[2]} ${x[2]}`, `${x[2]}a`, `0${x[2]}`, `00000000000000000${x[2]}`, ` ${x[2]} `, '1e3', `${x[2]}.0`, `\t${x[2]}`], pick),
      );
    case 'bad-chunk-size':
      return replaceOne(s, /\r\n([0-9a-fA-F]+)(;[^\r\n]*)?\r\n/g, at, (x) =>
        `\r\n${pickOf(['zz', '-1', '0x5', ` ${x[1]}`, `${x[1]} `, `${x[1]}\t`, '', `${x[1]};`, `${x[1]};=v`, `${x[1]};a=`, `${x[1]}; a = b`, `${x[1]} ;a`, `${x[1]};a="b`, `0000000000000${x[1]}`, `${x[1]}g`], pick)}${x[2] ?? ''}\r\n`,
      );
    case 'huge-size':
      return pick % 2 === 0
        ? replaceOne(s, /(content-length: *)(\d+)/gi, at, (x) => x[1] + pickOf(['99999999999999999999', '18446744073709551615', '18446744073709551616', '9007199254740993', '999999999999999', '1000000000000000'], pick >> 1))
        : replaceOne(s, /\r\n([0-9a-fA-F]+)(;[^\r\n]*)?\r\n/g, at, (x) => `\r\n${pickOf(['ffffffffffffffff', '10000000000000000', 'fffffffffffff', 'ffffffffffff', '7fffffff'], pick >> 1)}${x[2] ?? ''}\r\n`);
    case 'nul':
      return s.length === 0 ? '\0' : splice(s, at % s.length, pick % 2, '\0');
    case 'space-before-colon':
      return replaceOne(s, /\r\n([!-9;-~]+):/g, at, (x) => `\r\n${x[1]}${pickOf([' ', '\t', '  '], pick)}:`);
    case 'bad-token': {
      const bad = pickOf(['(', ')', ',', '/', '"', '@', '[', '{', '\x7f', '\xe9', '\x01'], pick);
      return pick % 3 === 0 ? splice(s, 0, 0, bad) : replaceOne(s, /\r\n([!-9;-~]+):/g, at, (x) => `\r\n${splice(x[1], at % x[1].length, 0, bad)}:`);
    }
    case 'bad-version':
      return replaceOne(s, /HTTP\/1\.[01]/g, 0, () => pickOf(['HTTP/1.2', 'HTTP/2.0', 'HTTP/0.9', 'http/1.1', 'HTTP/1.10', 'HTTP/01.1', 'HTTP/1', 'HTTP/1.1 ', 'HTTP /1.1', 'HTTP/3.0', 'HTTP/1.x'], pick));
    case 'bad-start':
      return replaceOne(s, /^[^\r\n]*/g, 0, (x) => {
        const line = x[0];
        return pickOf(
          [
            line.replace(' ', '  '),
            line.replace(/ (?=[^ ]*$)/, '  '),
            line.replace(' ', '\t'),
            `${line} `,
            ` ${line}`,
            line.replace(/ \d{3}/, (c) => ` ${c.slice(1)}`),
            line.replace(/ \d{3}/, (c) => `${c}0`),
            line.replace(/ \d{3}/, ' 099'),
            line.replace(/ \d{3}/, ' 600'),
            line.replace(/ \d{3}/, ' 100'),
            line.replace(/ \d{3}.*$/, (c) => c.slice(0, 4)),
            line.replace(/ \S+ /, ' /a b '),
            line.replace(/ \S+ /, ' /a#frag '),
            line.replace(/ \S+ /, ' noslash '),
            line.replace(/ \S+ /, ' host:80 '),
            line.replace(/^\S+/, 'get'),
            line.replace(/^\S+/, 'FOO'),
            line.replace(/^\S+/, 'CONNECT'),
            line.replace(/^\S+/, 'PRI'),
            line.replace(/^\S+/, 'QUERY'),
          ],
          pick,
        );
      });
    case 'transfer-coding':
      return replaceOne(s, /(transfer-encoding: *)chunked/gi, at, (x) =>
        x[1] + pickOf(['gzip', 'gzip, chunked', 'chunked, gzip', 'chunked, chunked', 'Chunked', ' chunked', 'chunked ', 'identity', 'chunkedx', 'chunked\r\nTransfer-Encoding: chunked', ''], pick),
      );
    case 'delete-byte':
      return s.length === 0 ? s : splice(s, at % s.length, 1, '');
    case 'insert-byte':
      return splice(s, at % (s.length + 1), 0, String.fromCharCode(pick % 256));
    case 'truncate':
      return s.slice(0, at % (s.length + 1));
    case 'leading-empty-line':
      return pickOf(['\r\n', '\r\n\r\n', '\n', '\r', ' \r\n'], pick) + s;
    case 'host':
      return replaceOne(s, /\r\n(host: *[^\r\n]*)\r\n/gi, at, (x) => pickOf(['\r\n', `\r\n${x[1]}\r\n${x[1]}\r\n`, `\r\n${x[1]}\r\nHost: other\r\n`, '\r\nHost:\r\n', `\r\n${x[1]} x\r\n`, '\r\nHost: a b\r\n', '\r\nHost: a/b\r\n'], pick));
    case 'whitespace':
      return replaceOne(s, /: ([^\r\n]*)\r\n/g, at, (x) => pickOf([`:${x[1]}\r\n`, `:  ${x[1]}  \r\n`, `:\t${x[1]}\t\r\n`, `: ${x[1]} \t \r\n`, `:${x[1]}\x0b\r\n`, `:${x[1]}\x0c\r\n`, `:\xa0${x[1]}\r\n`, `: ${x[1]}\xa0\r\n`, `:\x85${x[1]}\r\n`, `: \x0b${x[1]}\r\n`], pick));
  }
}

// ---- runs --------------------------------------------------------------------------

/** Cuts `input` at the given points (taken modulo its length), as reads from a socket might. */
export function segments(input: Buffer, cuts: number[]): Buffer[] {
  if (input.length === 0) return [input];
  const at = [...new Set(cuts.map((c) => c % input.length))].filter((c) => c > 0).sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const c of at) {
    out.push(input.subarray(prev, c));
    prev = c;
  }
  out.push(input.subarray(prev));
  return out;
}

/**
 * fast-check's parameters: seed 42 unless FLINT_FUZZ_SEED gives one (any
 * seed locally; the fixed one keeps CI repeatable), and FLINT_FUZZ_RUNS runs.
 */
export function fuzzParameters(defaultRuns: number): { seed: number; numRuns: number } {
  const seed = process.env.FLINT_FUZZ_SEED;
  const runs = process.env.FLINT_FUZZ_RUNS;
  return {
    seed: seed === undefined || seed === '' ? 42 : seed === 'random' ? Date.now() ^ (Math.random() * 0x100000000) : Number(seed),
    numRuns: runs === undefined || runs === '' ? defaultRuns : Number(runs),
  };
}

/** A difference between the two parsers that is meant, with the RFC's word for it. */
export interface KnownDifference {
  /** What differs, as a reader of the table would say it. */
  what: string;
  /** The RFC passage that makes the router's behaviour right. */
  why: string;
  /** Whether this difference explains what the two parsers made of `input`. */
  explains(input: string, ours: Outcome, theirs: Outcome): boolean;
}

/** The first message the two outcomes part on, or undefined when they agree on every message both read. */
function messageDivergence(ours: Outcome, theirs: Outcome, ignore: readonly (keyof Message)[]): string | undefined {
  const n = Math.min(ours.messages.length, theirs.messages.length);
  for (let i = 0; i < n; i++) {
    const a = ours.messages[i];
    const b = theirs.messages[i];
    for (const k of ['start', 'target', 'version', 'body', 'end', 'keepAlive', 'upgrade'] as const) {
      if (ignore.includes(k)) continue;
      if (a[k] !== b[k]) return `message ${i}: ${k} ${JSON.stringify(a[k])} (ours) vs ${JSON.stringify(b[k])} (llhttp)`;
    }
    if (JSON.stringify(a.headers) !== JSON.stringify(b.headers)) return `message ${i}: headers ${JSON.stringify(a.headers)} (ours) vs ${JSON.stringify(b.headers)} (llhttp)`;
  }
  return undefined;
}

/** The first place the two outcomes part, or undefined when they agree. */
export function divergence(ours: Outcome, theirs: Outcome, ignore: readonly (keyof Message)[] = []): string | undefined {
  const m = messageDivergence(ours, theirs, ignore);
  if (m !== undefined) return m;
  if (ours.messages.length !== theirs.messages.length) return `${ours.messages.length} message(s) (ours) vs ${theirs.messages.length} (llhttp)`;
  if (ours.verdict !== theirs.verdict) return `${ours.verdict}${ours.error === undefined ? '' : ` (${ours.error})`} (ours) vs ${theirs.verdict}${theirs.error === undefined ? '' : ` (${theirs.error})`} (llhttp)`;
  return undefined;
}

/** Ours refused, after reading the same messages llhttp read before it (if llhttp read more, ours refused one of them). */
export function oursRefused(ours: Outcome, theirs: Outcome, error: RegExp): boolean {
  return ours.verdict === 'error' && error.test(ours.error ?? '') && ours.messages.length <= theirs.messages.length && messageDivergence(ours, theirs, []) === undefined;
}

/** llhttp refused with one of `codes` where ours read on, after reading the same messages before. */
export function theirsRefused(ours: Outcome, theirs: Outcome, codes: readonly string[]): boolean {
  return theirs.verdict === 'error' && codes.includes(theirs.error ?? '') && ours.messages.length >= theirs.messages.length && messageDivergence(ours, theirs, []) === undefined;
}

/** The bytes of the message that starts where the last one both read ended: where the two part. */
export function messageAt(input: string, outcome: Outcome): string {
  const last = outcome.messages.at(-1);
  return input.slice(last === undefined ? 0 : last.end);
}

/**
 * Checks one input: undefined when the parsers agree or a known difference
 * explains what they made of it, else what is wrong. `finish` re-reads
 * input plus more bytes with the router's parser: a head llhttp refused at a
 * bad byte, ours refuses only once the head has ended, and that is checked.
 */
export function judge(input: string, ours: Outcome, theirs: Outcome, table: readonly KnownDifference[], finish: (more: string) => Outcome, ignore: readonly (keyof Message)[] = []): string | undefined {
  const d = divergence(ours, theirs, ignore);
  if (d === undefined) return undefined;
  for (const k of table) if (k.explains(input, ours, theirs)) return undefined;
  if (ours.verdict === 'partial' && theirs.verdict === 'error' && messageDivergence(ours, theirs, ignore) === undefined) {
    const later = finish('\r\n\r\n');
    if (later.verdict === 'error' && later.messages.length === ours.messages.length) return undefined;
    return `llhttp refused (${theirs.error}) what ours still reads on, and ours did not refuse it once the head ended: ${divergence(later, theirs, ignore)}`;
  }
  return d;
}

/**
 * Differences in body framing, the same for requests and responses (both
 * parsers share the router's body decoder). `ours` and `theirs` read bytes as
 * the test does; `table` is the whole table, for re-judging a cleaned-up input.
 */
export function framingDifferences(ours: (reads: Buffer[]) => Outcome, theirs: (input: Buffer) => Outcome, table: () => readonly KnownDifference[]): KnownDifference[] {
  return [
    {
      what: 'a Content-Length past 15 digits, or a chunk size past 12 hex digits (leading zeros aside), is refused',
      why: 'RFC 9110 8.6 and RFC 9112 7.1: recipients "MUST anticipate potentially large decimal numerals and prevent parsing errors due to integer conversion overflows or precision loss"; 10^15 bytes is no message the router takes',
      explains: (_, o, t) => oursRefused(o, t, /bad Content-Length "0*\d{16,}|bad chunk size line "0*[0-9a-fA-F]{13,}/),
    },
    {
      what: 'spaces and tabs around the `;` and `=` of a chunk extension are taken (llhttp refuses them unless lenient)',
      why: "RFC 9112 7.1.1: chunk-ext = *( BWS \";\" BWS chunk-ext-name [ BWS \"=\" BWS chunk-ext-val ] )",
      // Takes the spaces out: if ours reads that as it read the input, and
      // llhttp then reads it as ours does (or as the table allows), the
      // spaces were the difference.
      explains: (input, o, t) => {
        if (!theirsRefused(o, t, ['HPE_INVALID_CHUNK_SIZE', 'HPE_STRICT', 'HPE_INVALID_CHUNK_EXTENSIONS'])) return false;
        const tight = input.replace(/(\r\n[0-9a-fA-F]+)([ \t]*;[^\r\n]*)(?=\r\n)/g, (_, size: string, ext: string) => size + ext.replace(/[ \t]*([;=])[ \t]*/g, '$1'));
        if (tight === input) return false;
        const bytes = Buffer.from(tight, 'latin1');
        const mine = ours([bytes]);
        if (mine.verdict !== o.verdict || mine.messages.length !== o.messages.length) return false;
        return judge(tight, mine, theirs(bytes), table(), (more) => ours([bytes, Buffer.from(more, 'latin1')])) === undefined;
      },
    },
    {
      what: 'a chunk extension outside the grammar (an empty name or value, a value that is neither a token nor a quoted string) is refused; llhttp takes `;;`, `;=v`, `;n=`, `;n=-"q"`',
      why: 'RFC 9112 7.1.1: chunk-ext-name is a token and chunk-ext-val a token or quoted-string; a chunk line two readers split differently is a smuggling vector',
      explains: (_, o, t) => oursRefused(o, t, /bad chunk size line "0*[0-9a-fA-F]{1,12}[ \t]*;/),
    },
    {
      what: 'a tab after `chunked` is whitespace around the value, as a space is (llhttp refuses the tab in a request, and reads a response\'s body until the close)',
      why: 'RFC 9110 5.5: leading and trailing OWS (spaces and tabs alike) is not part of a field value',
      explains: (input, o, t) =>
        (theirsRefused(o, t, ['HPE_INVALID_TRANSFER_ENCODING']) || (t.messages.length === 1 && !t.messages[0].keepAlive && t.messages[0].end === input.length)) &&
        /transfer-encoding:[ \t]*chunked[ \t]*\t[ \t]*\r\n/i.test(input),
    },
  ];
}
