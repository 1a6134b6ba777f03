import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatLogLine, matchesLogFilter, parseLogLine, takeRequestMark } from './function-log-line.ts';

describe('function log lines', () => {
  it('round-trips the fields, the stream right before the text', () => {
    const line = formatLogLine({ time: '2025-01-01T00:00:00.000Z', instance: 'node-ab12', requestId: 'r-1', stream: 'stdout', text: 'hello [stdout] request=x' });
    assert.equal(line, '2025-01-01T00:00:00.000Z instance=node-ab12 request=r-1 [stdout] hello [stdout] request=x');
    assert.deepEqual(parseLogLine(line), { time: '2025-01-01T00:00:00.000Z', instance: 'node-ab12', requestId: 'r-1', stream: 'stdout', text: 'hello [stdout] request=x' });
    assert.deepEqual(parseLogLine('2025-01-01T00:00:00.000Z [flint] started'), { time: '2025-01-01T00:00:00.000Z', stream: 'flint', text: 'started' });
    assert.equal(parseLogLine('no fields here'), undefined);
  });

  it('takes a mark only with a valid id in it', () => {
    assert.deepEqual(takeRequestMark('\x1eabc\x1etext'), { requestId: 'abc', text: 'text' });
    for (const bad of ['\x1ea b\x1etext', '\x1e\x1etext', `\x1e${'x'.repeat(193)}\x1etext`, '\x1eunclosed', '\x1e\x1b[2J\x1etext']) {
      assert.deepEqual(takeRequestMark(bad), { text: bad }, JSON.stringify(bad));
    }
  });

  it('never writes a field a reader would misread', () => {
    const line = formatLogLine({ time: 't', instance: 'Bad Instance', requestId: 'bad id', stream: 'stdout', text: 'x' });
    assert.equal(line, 't [stdout] x');
  });

  it('filters on what the line carries', () => {
    const l = parseLogLine('t instance=w-1 request=r-1 [stdout] x');
    assert.ok(matchesLogFilter(l, { requestId: 'r-1', instance: 'w-1' }));
    assert.ok(!matchesLogFilter(l, { requestId: 'r-2' }));
    assert.ok(!matchesLogFilter(parseLogLine('t [stdout] x'), { instance: 'w-1' }));
    assert.ok(matchesLogFilter(undefined, {}));
  });
});
