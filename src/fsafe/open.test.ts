// Files opened where user content can reach: a link, a FIFO or a second hard
// link at the name is refused and nothing is written through it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { appendStreamNoFollow, openNoFollow, readRangeNoFollow, readStreamNoFollow, writeFileNoFollow } from './open.ts';

let dir: string;
let outside: string;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-fsafe-'));
  outside = path.join(dir, 'outside.txt');
  fs.writeFileSync(outside, 'precious\n');
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const unsafe = (re: RegExp) => (e: any) => e.code === 'FLINT_ERR_UNSAFE_PATH' && re.test(e.message);

describe('openNoFollow', () => {
  it('appends to and replaces a plain file of its own', async () => {
    const f = path.join(dir, 'plain.log');
    const s = appendStreamNoFollow(f);
    await new Promise<void>((r) => s.end('one\n', () => r()));
    const s2 = appendStreamNoFollow(f);
    await new Promise<void>((r) => s2.end('two\n', () => r()));
    assert.equal(fs.readFileSync(f, 'utf8'), 'one\ntwo\n');
    writeFileNoFollow(f, 'new', 'replace');
    assert.equal(fs.readFileSync(f, 'utf8'), 'new');
    const chunks: Buffer[] = [];
    for await (const c of readStreamNoFollow(f)) chunks.push(c as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), 'new');
  });

  it('refuses a symbolic link at the name for every way of opening, leaving its target alone', () => {
    const link = path.join(dir, 'planted.log');
    fs.symlinkSync(outside, link);
    for (const how of ['read', 'append', 'replace', 'create'] as const) {
      assert.throws(() => openNoFollow(link, how), how === 'create' ? /EEXIST/ : unsafe(/symbolic link/), how);
    }
    assert.throws(() => appendStreamNoFollow(link), unsafe(/symbolic link/));
    assert.throws(() => writeFileNoFollow(link, 'x', 'replace'), unsafe(/symbolic link/));
    assert.equal(fs.readFileSync(outside, 'utf8'), 'precious\n');
  });

  it('refuses a dangling link instead of creating its target', () => {
    const link = path.join(dir, 'dangling.log');
    const target = path.join(dir, 'would-be-created');
    fs.symlinkSync(target, link);
    assert.throws(() => openNoFollow(link, 'append'), unsafe(/symbolic link/));
    assert.equal(fs.existsSync(target), false);
  });

  it('refuses a second hard link to a file for writing', () => {
    const hard = path.join(dir, 'hard.log');
    fs.linkSync(outside, hard);
    assert.throws(() => openNoFollow(hard, 'append'), unsafe(/2 hard links/));
    // Replacing it must not empty the file it is linked to on the way to refusing.
    assert.throws(() => openNoFollow(hard, 'replace'), unsafe(/2 hard links/));
    assert.equal(fs.readFileSync(outside, 'utf8'), 'precious\n');
  });

  it('refuses a FIFO without blocking on it', () => {
    const fifo = path.join(dir, 'fifo.log');
    execFileSync('mkfifo', [fifo]);
    assert.throws(() => openNoFollow(fifo, 'read'), unsafe(/not a regular file/));
  });

  it('refuses a directory', () => {
    assert.throws(() => openNoFollow(dir, 'read'), unsafe(/not a regular file/));
  });
});

describe('readRangeNoFollow', () => {
  it('reads whole lines only: the tail, or from an offset up to the cap, saying where the next read goes on', () => {
    const f = path.join(dir, 'range.log');
    fs.writeFileSync(f, 'één\ntwee\ndrie\n');
    const { size, dev, ino } = fs.statSync(f);
    const file = `${dev}:${ino}`;
    assert.deepEqual(readRangeNoFollow(f, undefined, 1024), { text: 'één\ntwee\ndrie\n', start: 0, next: size, size, file });
    assert.deepEqual(readRangeNoFollow(f, undefined, 5), { text: 'drie\n', start: size - 5, next: size, size, file });
    // From the start, capped inside the second line: only the first, whole, and so no character cut in two.
    assert.deepEqual(readRangeNoFollow(f, 0, 8), { text: 'één\n', start: 0, next: 6, size, file });
    assert.deepEqual(readRangeNoFollow(f, size, 1024), { text: '', start: size, next: size, size, file });
    assert.deepEqual(readRangeNoFollow(f, size + 10, 1024), { text: 'één\ntwee\ndrie\n', start: 0, next: size, size, file }, 'past the end: the file was cut');
    assert.deepEqual(readRangeNoFollow(path.join(dir, 'none.log'), undefined, 1024), { text: '', start: 0, next: 0, size: 0, file: '' });
  });

  it('leaves a line still being written, cut inside a character, for the next read', () => {
    const f = path.join(dir, 'partial.log');
    // The last line stops after the first byte of a two-byte character.
    fs.writeFileSync(f, Buffer.concat([Buffer.from('whole\nhalf '), Buffer.from('é').subarray(0, 1)]));
    const first = readRangeNoFollow(f, 0, 1024);
    assert.deepEqual([first.text, first.next], ['whole\n', 6]);
    fs.appendFileSync(f, Buffer.concat([Buffer.from('é').subarray(1), Buffer.from(' done\n')]));
    assert.equal(readRangeNoFollow(f, first.next, 1024).text, 'half é done\n');
    // A line longer than the cap comes in pieces, the offsets exact.
    const long = path.join(dir, 'long.log');
    fs.writeFileSync(long, `${'x'.repeat(10)}\n`);
    const piece = readRangeNoFollow(long, 0, 4);
    assert.deepEqual([piece.text, piece.next], ['xxxx', 4]);
  });

  it('refuses a link planted at the name', () => {
    const link = path.join(dir, 'range-link.log');
    fs.symlinkSync(outside, link);
    assert.throws(() => readRangeNoFollow(link, undefined, 1024), unsafe(/symbolic link/));
    assert.throws(() => readRangeNoFollow(link, 0, 1024), unsafe(/symbolic link/));
  });
});
