import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BuildLog } from './build-log.ts';

describe('BuildLog', () => {
  it('keeps every line of a small build, in order', () => {
    const log = new BuildLog();
    log.line('+ npm install');
    log.line('added 1 package');
    assert.equal(log.text(), '+ npm install\nadded 1 package\n');
  });

  it('keeps the start and the end of a huge build and says what it left out', () => {
    const log = new BuildLog();
    for (let i = 0; i < 100_000; i++) log.line(`line ${i} ${'x'.repeat(40)}`);
    const text = log.text();
    assert.ok(text.startsWith('line 0 '));
    assert.ok(text.trimEnd().endsWith(`line 99999 ${'x'.repeat(40)}`));
    assert.match(text, /\[\.\.\. \d+ lines of build output left out \.\.\.\]/);
    assert.ok(Buffer.byteLength(text) < 300 * 1024);
  });

  it('is empty for a silent build', () => {
    assert.equal(new BuildLog().text(), '');
  });
});
