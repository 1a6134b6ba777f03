import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LineSplitter, MAX_LINE, Tail } from './lines.ts';

describe('LineSplitter', () => {
  it('splits chunks into lines, across chunk and UTF-8 boundaries, and flushes the rest at end', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    const euro = Buffer.from('€');
    s.write(Buffer.from('one\ntw'));
    s.write(Buffer.concat([Buffer.from('o '), euro.subarray(0, 1)]));
    s.write(Buffer.concat([euro.subarray(1), Buffer.from('\r\nthree\n\nlast')]));
    s.end();
    assert.deepEqual(lines, ['one', 'two €', 'three', '', 'last']);
  });

  it('cuts lines longer than the cap', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    s.write(Buffer.from('x'.repeat(MAX_LINE * 2 + 5)));
    assert.deepEqual(
      lines.map((l) => l.length),
      [MAX_LINE, MAX_LINE],
    );
    s.write(Buffer.from(`${'y'.repeat(10)}\n`));
    s.end();
    assert.equal(lines[2], `xxxxx${'y'.repeat(10)}`);
  });
});

describe('Tail', () => {
  it('keeps the last lines', () => {
    const t = new Tail(2);
    for (const l of ['a', 'b', 'c']) t.push(l);
    assert.equal(t.text(), 'b\nc');
  });
});
