import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CLOSE_GOING_AWAY, closeFrame, FrameBoundary } from './ws-frames.ts';

/** An unmasked frame (as a server sends) or a masked one (as a client does) with `length` payload bytes. */
function frame(length: number, masked: boolean): Buffer {
  let head: Buffer;
  if (length < 126) head = Buffer.from([0x82, length]);
  else if (length < 0x10000) {
    head = Buffer.from([0x82, 126, 0, 0]);
    head.writeUInt16BE(length, 2);
  } else {
    head = Buffer.alloc(10);
    head[0] = 0x82;
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(length), 2);
  }
  if (masked) {
    head[1] |= 0x80;
    head = Buffer.concat([head, Buffer.from([1, 2, 3, 4])]);
  }
  return Buffer.concat([head, Buffer.alloc(length, 7)]);
}

describe('WebSocket frame boundaries', () => {
  for (const masked of [false, true]) {
    it(`follows ${masked ? 'masked' : 'unmasked'} frames of every length form, fed whole or byte by byte`, () => {
      const frames = [frame(0, masked), frame(5, masked), frame(300, masked), frame(70_000, masked)];
      const stream = Buffer.concat(frames);
      const whole = new FrameBoundary();
      whole.feed(stream);
      assert.equal(whole.between, true);
      const ends = new Set<number>();
      let at = 0;
      for (const f of frames) {
        at += f.length;
        ends.add(at);
      }
      const byByte = new FrameBoundary();
      for (let i = 0; i < stream.length; i++) {
        byByte.feed(stream.subarray(i, i + 1));
        assert.equal(byByte.between, ends.has(i + 1), `after byte ${i + 1}`);
      }
    });
  }

  it('is not between frames inside a header', () => {
    const b = new FrameBoundary();
    b.feed(Buffer.from([0x82]));
    assert.equal(b.between, false);
    b.feed(Buffer.from([126, 0]));
    assert.equal(b.between, false);
    b.feed(Buffer.from([2, 9]));
    assert.equal(b.between, false, 'one of two payload bytes');
    b.feed(Buffer.from([9]));
    assert.equal(b.between, true);
  });

  it('never ends a frame whose length is past 2^53', () => {
    const b = new FrameBoundary();
    b.feed(Buffer.from([0x82, 127, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));
    b.feed(Buffer.alloc(1 << 16));
    assert.equal(b.between, false);
  });

  it('builds close frames: unmasked to the client, masked to the instance, the reason cut to fit', () => {
    assert.deepEqual([...closeFrame(CLOSE_GOING_AWAY, 'idle timeout', false)], [0x88, 14, 0x03, 0xe9, ...Buffer.from('idle timeout')]);
    const masked = closeFrame(CLOSE_GOING_AWAY, 'bye', true);
    assert.deepEqual([...masked.subarray(0, 2)], [0x88, 0x80 | 5]);
    const mask = masked.subarray(2, 6);
    const payload = Buffer.from(masked.subarray(6).map((v, i) => v ^ mask[i % 4]));
    assert.equal(payload.readUInt16BE(0), 1001);
    assert.equal(payload.subarray(2).toString(), 'bye');
    const long = closeFrame(CLOSE_GOING_AWAY, 'x'.repeat(500), false);
    assert.equal(long[1], 125);
    assert.equal(long.length, 127);
  });
});
