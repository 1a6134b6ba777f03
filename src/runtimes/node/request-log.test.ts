import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { takeRequestMark } from '../../api/function-log-line.ts';
import { inRequest, markLines, requestIdOf, tagRequestOutput } from './request-log.ts';

const req = (id: unknown) => ({ headers: id === undefined ? {} : { 'x-flint-request-id': id } }) as unknown as IncomingMessage;

function sink(): { stream: Writable; lines(): string[] } {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  return { stream, lines: () => text.split('\n').slice(0, -1) };
}

describe('node runtime: request ids on output lines', () => {
  it('marks each line written inside a request, and none outside', async () => {
    const { stream, lines } = sink();
    tagRequestOutput(stream);
    stream.write('before\n');
    await inRequest(req('req-1'), async () => {
      stream.write('one\ntwo\n');
      stream.write('part');
      await new Promise((r) => setTimeout(r, 1));
      stream.write(Buffer.from(' of three\n'));
    });
    stream.write('after\n');
    const parsed = lines().map(takeRequestMark);
    assert.deepEqual(parsed, [{ text: 'before' }, { requestId: 'req-1', text: 'one' }, { requestId: 'req-1', text: 'two' }, { requestId: 'req-1', text: 'part of three' }, { text: 'after' }]);
  });

  it('keeps concurrent requests apart', async () => {
    const { stream, lines } = sink();
    tagRequestOutput(stream);
    const call = (id: string) =>
      inRequest(req(id), async () => {
        for (let i = 0; i < 3; i++) {
          stream.write(`${id} ${i}\n`);
          await new Promise((r) => setImmediate(r));
        }
      });
    await Promise.all([call('a'), call('b')]);
    for (const l of lines().map(takeRequestMark)) assert.equal(l.requestId, l.text.split(' ')[0]);
  });

  it('takes no id that is not one (line breaks, escapes, spaces, too long)', () => {
    for (const bad of ['a\nb', '\x1b[31mred', 'a b', 'x'.repeat(193), '', ['a', 'b']]) assert.equal(requestIdOf(req(bad)), undefined, JSON.stringify(bad));
    assert.equal(requestIdOf(req('Ab3-_x.1')), 'Ab3-_x.1');
  });

  it('marks a line start carried over from an earlier write', () => {
    assert.equal(markLines('x\ny', 'r', false), 'x\n\x1er\x1ey');
    assert.equal(markLines('\n', 'r', true), '\x1er\x1e\n');
  });
});
