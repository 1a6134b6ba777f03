// The frame parser on its own: client frames in, messages and control
// frames out, and each protocol violation with the close code it earns.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FrameParser, type WsEvent } from './ws-parser.ts';
import { clientFrame, closeBody, hugeHeader } from './ws-testing.ts';

const TEXT = 0x1;
const BINARY = 0x2;
const CLOSE = 0x8;
const PING = 0x9;
const PONG = 0xa;
const MIB = 1024 * 1024;

function parse(bytes: Buffer, maxPayload = 16 * MIB): WsEvent[] {
  return new FrameParser(maxPayload).push(bytes);
}

/** The same bytes fed one at a time. */
function parseBytewise(bytes: Buffer, maxPayload = 16 * MIB): WsEvent[] {
  const p = new FrameParser(maxPayload);
  const events: WsEvent[] = [];
  for (let i = 0; i < bytes.length; i++) events.push(...p.push(bytes.subarray(i, i + 1)));
  return events;
}

function failure(events: WsEvent[]): { code: number; message: string } {
  const last = events.at(-1);
  assert.equal(last?.type, 'error', `expected a protocol error, got ${JSON.stringify(events.map((e) => e.type))}`);
  return last as { code: number; message: string };
}

function messages(events: WsEvent[]): { text: string | undefined; bytes: Buffer; isBinary: boolean }[] {
  return events
    .filter((e) => e.type === 'message')
    .map((e) => ({ text: e.isBinary ? undefined : e.data.toString('utf8'), bytes: e.data, isBinary: e.isBinary }));
}

describe('ws frame parser: messages', () => {
  it('unmasks a text message and tells text from binary', () => {
    const events = parse(Buffer.concat([clientFrame(TEXT, 'héllo ✓'), clientFrame(BINARY, Buffer.from([0, 1, 2, 255]))]));
    assert.deepEqual(
      events.map((e) => e.type),
      ['message', 'message'],
    );
    const [text, binary] = messages(events);
    assert.equal(text.text, 'héllo ✓');
    assert.equal(text.isBinary, false);
    assert.deepEqual([...binary.bytes], [0, 1, 2, 255]);
    assert.equal(binary.isBinary, true);
  });

  it('reads 7-bit, 16-bit and 64-bit lengths, also a 64-bit length for a short payload', () => {
    for (const size of [0, 125, 126, 65535, 65536, 200_000]) {
      const payload = Buffer.alloc(size, 'x');
      for (let i = 0; i < size; i += 997) payload[i] = i % 251;
      const [m] = messages(parse(clientFrame(BINARY, payload)));
      assert.ok(m, `a message of ${size} bytes`);
      assert.ok(m.bytes.equals(payload), `the bytes of a ${size}-byte message`);
    }
    assert.equal(messages(parse(clientFrame(TEXT, 'short', { lengthBits: 64 })))[0].text, 'short');
    assert.equal(messages(parse(clientFrame(TEXT, 'short', { lengthBits: 16 })))[0].text, 'short');
  });

  it('reassembles a fragmented message, with control frames between the fragments', () => {
    const events = parse(
      Buffer.concat([
        clientFrame(TEXT, 'frag', { fin: false }),
        clientFrame(PING, 'p1'),
        clientFrame(0, 'men', { fin: false }),
        clientFrame(PONG, 'p2'),
        clientFrame(0, 'ted'),
        clientFrame(BINARY, Buffer.from([9]), { fin: false }),
        clientFrame(0, Buffer.from([8])),
      ]),
    );
    assert.deepEqual(
      events.map((e) => e.type),
      ['ping', 'pong', 'message', 'message'],
    );
    assert.equal((events[0] as { data: Buffer }).data.toString(), 'p1');
    assert.equal((events[1] as { data: Buffer }).data.toString(), 'p2');
    const [text, binary] = messages(events);
    assert.equal(text.text, 'fragmented');
    assert.deepEqual([...binary.bytes], [9, 8]);
    assert.equal(binary.isBinary, true);
  });

  it('accepts a UTF-8 character split across fragments, and empty fragments', () => {
    const check = Buffer.from('✓');
    const events = parse(
      Buffer.concat([
        clientFrame(TEXT, check.subarray(0, 1), { fin: false }),
        clientFrame(0, '', { fin: false }),
        clientFrame(0, check.subarray(1)),
        clientFrame(TEXT, ''),
      ]),
    );
    assert.deepEqual(
      messages(events).map((m) => m.text),
      ['✓', ''],
    );
  });

  it('gives the same events when the bytes arrive one at a time or in odd pieces', () => {
    const stream = Buffer.concat([
      clientFrame(TEXT, 'one'),
      clientFrame(TEXT, 'two-', { fin: false }),
      clientFrame(PING, 'ping!'),
      clientFrame(0, 'parts'),
      clientFrame(BINARY, Buffer.alloc(70_000, 7)),
      clientFrame(TEXT, 'after 16', { lengthBits: 16 }),
      clientFrame(CLOSE, closeBody(1000, 'bye')),
    ]);
    const whole = parse(stream);
    assert.deepEqual(
      whole.map((e) => e.type),
      ['message', 'ping', 'message', 'message', 'message', 'close'],
    );
    assert.deepEqual(parseBytewise(stream), whole);
    for (const size of [2, 3, 5, 13, 1000]) {
      const p = new FrameParser(16 * MIB);
      const events: WsEvent[] = [];
      for (let i = 0; i < stream.length; i += size) events.push(...p.push(stream.subarray(i, i + size)));
      assert.deepEqual(events, whole, `pieces of ${size} bytes`);
    }
  });

  it('leaves the bytes it was given unchanged', () => {
    const frame = clientFrame(TEXT, 'unchanged');
    const copy = Buffer.from(frame);
    parse(frame);
    assert.ok(frame.equals(copy));
  });
});

describe('ws frame parser: close frames', () => {
  it('reads the code and reason, 1005 for an empty close, and nothing after a close', () => {
    const events = parse(Buffer.concat([clientFrame(CLOSE, closeBody(4000, 'done ✓')), clientFrame(TEXT, 'ignored')]));
    assert.equal(events.length, 1);
    assert.equal(events[0].type, 'close');
    const close = events[0] as { code: number; reason: Buffer };
    assert.equal(close.code, 4000);
    assert.equal(close.reason.toString(), 'done ✓');
    const empty = parse(clientFrame(CLOSE)) as { type: string; code: number; reason: Buffer }[];
    assert.equal(empty[0].code, 1005);
    assert.equal(empty[0].reason.length, 0);
  });

  it('accepts the codes that may travel on the wire', () => {
    for (const code of [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999]) {
      const [e] = parse(clientFrame(CLOSE, closeBody(code)));
      assert.equal(e.type, 'close', `code ${code}`);
    }
  });

  it('refuses reserved, report-only and out-of-range codes with 1002', () => {
    for (const code of [0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535]) {
      assert.equal(failure(parse(clientFrame(CLOSE, closeBody(code)))).code, 1002, `code ${code}`);
    }
  });

  it('refuses a 1-byte close payload (1002) and a reason that is not UTF-8 (1007)', () => {
    assert.equal(failure(parse(clientFrame(CLOSE, Buffer.from([3])))).code, 1002);
    assert.equal(failure(parse(clientFrame(CLOSE, closeBody(1000, Buffer.from([0xc3, 0x28]))))).code, 1007);
  });
});

describe('ws frame parser: protocol errors', () => {
  const cases: [string, Buffer, number][] = [
    ['an unmasked frame', clientFrame(TEXT, 'x', { mask: false }), 1002],
    ['RSV1 set (no compression was negotiated)', clientFrame(TEXT, 'x', { rsv: 4 }), 1002],
    ['RSV2 set', clientFrame(TEXT, 'x', { rsv: 2 }), 1002],
    ['RSV3 set', clientFrame(TEXT, 'x', { rsv: 1 }), 1002],
    ['opcode 0x3', clientFrame(0x3, 'x'), 1002],
    ['opcode 0x7', clientFrame(0x7, 'x'), 1002],
    ['opcode 0xb', clientFrame(0xb, 'x'), 1002],
    ['opcode 0xf', clientFrame(0xf, 'x'), 1002],
    ['a fragmented ping', clientFrame(PING, 'x', { fin: false }), 1002],
    ['a fragmented close', clientFrame(CLOSE, closeBody(1000), { fin: false }), 1002],
    ['a ping over 125 bytes', clientFrame(PING, Buffer.alloc(126)), 1002],
    ['a pong over 125 bytes', clientFrame(PONG, Buffer.alloc(200)), 1002],
    ['a continuation without a message', clientFrame(0, 'x'), 1002],
    ['a text frame inside a fragmented message', Buffer.concat([clientFrame(TEXT, 'a', { fin: false }), clientFrame(TEXT, 'b')]), 1002],
    ['a binary frame inside a fragmented message', Buffer.concat([clientFrame(BINARY, 'a', { fin: false }), clientFrame(BINARY, 'b')]), 1002],
    ['a text message that is not UTF-8', clientFrame(TEXT, Buffer.from([0x68, 0xff, 0x69])), 1007],
    ['a truncated UTF-8 sequence at the end of a message', clientFrame(TEXT, Buffer.from('✓').subarray(0, 2)), 1007],
    [
      'invalid UTF-8 across fragments',
      Buffer.concat([clientFrame(TEXT, Buffer.from([0xe2]), { fin: false }), clientFrame(0, Buffer.from([0x28, 0xa1]))]),
      1007,
    ],
    ['a 64-bit length of 2^53', hugeHeader(BINARY, 0x200000), 1009],
    ['a 64-bit length with the top bit set', hugeHeader(BINARY, 0x80000000), 1009],
  ];
  for (const [what, bytes, code] of cases) {
    it(`closes with ${code} on ${what}, also fed byte by byte`, () => {
      const f = failure(parse(bytes));
      assert.equal(f.code, code);
      assert.ok(f.message.length > 0);
      assert.equal(failure(parseBytewise(bytes)).code, code);
    });
  }

  it('stops at the first error: the events before it stand, nothing after it counts', () => {
    const p = new FrameParser(16 * MIB);
    const events = p.push(Buffer.concat([clientFrame(TEXT, 'ok'), clientFrame(TEXT, 'bad', { mask: false }), clientFrame(TEXT, 'later')]));
    assert.deepEqual(
      events.map((e) => e.type),
      ['message', 'error'],
    );
    assert.deepEqual(p.push(clientFrame(TEXT, 'more')), []);
  });
});

describe('ws frame parser: the size limit', () => {
  it('takes a message of exactly maxPayload bytes, single or fragmented', () => {
    assert.equal(messages(parse(clientFrame(BINARY, Buffer.alloc(1000)), 1000))[0].bytes.length, 1000);
    const parts = Buffer.concat([clientFrame(BINARY, Buffer.alloc(600), { fin: false }), clientFrame(0, Buffer.alloc(400))]);
    assert.equal(messages(parse(parts, 1000))[0].bytes.length, 1000);
  });

  it('refuses a larger frame with 1009 from its header, before the payload arrives', () => {
    const header = clientFrame(BINARY, Buffer.alloc(1001)).subarray(0, 4);
    assert.equal(failure(parse(header, 1000)).code, 1009);
    assert.equal(failure(parse(hugeHeader(BINARY, 1), 1000)).code, 1009, 'a 4 GiB frame');
  });

  it('refuses a message whose fragments together exceed the limit with 1009', () => {
    const parts = Buffer.concat([clientFrame(TEXT, 'a'.repeat(600), { fin: false }), clientFrame(0, 'b'.repeat(401))]);
    assert.equal(failure(parse(parts, 1000)).code, 1009);
    assert.equal(failure(parseBytewise(parts, 1000)).code, 1009);
  });

  it('does not count control frames between fragments towards a message', () => {
    const parts = Buffer.concat([clientFrame(TEXT, 'a'.repeat(1000), { fin: false }), clientFrame(PING, 'x'.repeat(125)), clientFrame(0, '')]);
    assert.deepEqual(
      parse(parts, 1000).map((e) => e.type),
      ['ping', 'message'],
    );
  });
});
