import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_REMEMBERED_HEAD, RememberedHead } from './remembered-head.ts';

const bytes = (s: string) => Buffer.from(s, 'latin1');

/** Looks `s` up in the middle of a larger buffer, and remembers it when asked to, as a parser does. */
function see(r: RememberedHead<string>, s: string): 'hit' | 'kept' | 'not kept' {
  const buf = bytes(`xx${s}yy`);
  if (r.get(buf, 2, 2 + s.length) !== undefined) return 'hit';
  if (!r.wanted) return 'not kept';
  return r.set(buf, 2, 2 + s.length, s) ? 'kept' : 'not kept';
}

describe('RememberedHead', () => {
  it('knows exactly the bytes it kept: not a prefix, not a longer run, not one byte changed', () => {
    const r = new RememberedHead<string>();
    assert.equal(see(r, 'GET / HTTP/1.1'), 'kept');
    assert.equal(see(r, 'GET / HTTP/1.1'), 'hit');
    assert.equal(r.get(bytes('GET / HTTP/1.'), 0, 13), undefined);
    assert.equal(r.get(bytes('GET / HTTP/1.11'), 0, 15), undefined);
    assert.equal(r.get(bytes('GET / HTTP/1.0'), 0, 14), undefined);
    assert.equal(r.get(bytes('GET / HTTP/1.1'), 0, 14), 'GET / HTTP/1.1');
  });

  it('keeps a copy of its own, so a socket buffer reused for other bytes does not change what it knows', () => {
    const r = new RememberedHead<string>();
    const buf = bytes('HEAD-A');
    r.set(buf, 0, 6, 'A');
    buf.write('HEAD-B');
    assert.equal(r.get(buf, 0, 6), undefined);
    assert.equal(r.get(bytes('HEAD-A'), 0, 6), 'A');
  });

  it('does not keep a head longer than its limit', () => {
    const r = new RememberedHead<string>();
    const long = 'x'.repeat(MAX_REMEMBERED_HEAD + 1);
    assert.equal(see(r, long), 'not kept');
    assert.equal(see(r, long), 'not kept', 'asked again: it was never kept');
    const atLimit = 'y'.repeat(MAX_REMEMBERED_HEAD);
    assert.equal(see(r, atLimit), 'kept');
    assert.equal(see(r, atLimit), 'hit');
    const small = new RememberedHead<string>(16);
    assert.equal(see(small, 'x'.repeat(17)), 'not kept');
    assert.equal(see(small, 'x'.repeat(16)), 'kept');
  });

  it('freezes what it parses only when it keeps it', () => {
    const r = new RememberedHead<{ n: number }>(8);
    const frozen: boolean[] = [];
    const freeze = (v: { n: number }) => {
      frozen.push(true);
      return Object.freeze(v);
    };
    const short = r.parse(bytes('short'), 0, 5, () => ({ n: 1 }), freeze);
    const long = r.parse(bytes('much too long'), 0, 13, () => ({ n: 2 }), freeze);
    assert.ok(Object.isFrozen(short) && !Object.isFrozen(long));
    assert.equal(frozen.length, 1);
    assert.equal(r.parse(bytes('short'), 0, 5, () => assert.fail('parsed again'), freeze), short);
  });

  it('keeps only one head in 16 while heads keep changing, and every one again after a repeat', () => {
    const r = new RememberedHead<string>();
    const kept: number[] = [];
    for (let i = 0; i < 40; i++) if (see(r, `GET /?i=${i} HTTP/1.1`) === 'kept') kept.push(i);
    assert.deepEqual(kept, [0, 1, 2, 3, 15, 31]);
    // The head kept last comes again: the connection repeats itself now, and every new head is kept.
    assert.equal(see(r, 'GET /?i=31 HTTP/1.1'), 'hit');
    assert.equal(see(r, 'GET /?i=99 HTTP/1.1'), 'kept');
    assert.equal(see(r, 'GET /?i=99 HTTP/1.1'), 'hit');
  });
});
