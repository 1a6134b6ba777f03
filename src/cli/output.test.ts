import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Io } from './io.ts';
import { age, printList } from './output.ts';

describe('CLI output', () => {
  it("says an object's AGE as kubectl does", () => {
    const now = Date.parse('2026-01-10T00:00:00Z');
    const ago = (s: number) => new Date(now - s * 1000).toISOString();
    const cases: Array<[number, string]> = [
      [0, '0s'],
      [119, '119s'],
      [120, '2m'],
      [125, '2m5s'],
      [600, '10m'],
      [179 * 60, '179m'],
      [3 * 3600, '3h'],
      [3 * 3600 + 60, '3h1m'],
      [8 * 3600, '8h'],
      [47 * 3600, '47h'],
      [2 * 86400, '2d'],
      [2 * 86400 + 3600, '2d1h'],
      [8 * 86400, '8d'],
      [730 * 86400, '2y'],
      [731 * 86400, '2y1d'],
      [9 * 365 * 86400, '9y'],
    ];
    for (const [seconds, want] of cases) assert.equal(age(ago(seconds), now), want, `${seconds} s`);
    assert.equal(age(undefined, now), '<none>');
    assert.equal(age(new Date(now + 5000).toISOString(), now), '<invalid>');
  });

  it('prints a list as a table, wide, without headers, or as the objects themselves', async () => {
    const items = [{ metadata: { name: 'a', creationTimestamp: new Date(Date.now() - 5000).toISOString() }, n: 1 }];
    const columns = { header: ['NAME', 'N'], row: (x: (typeof items)[number]) => [x.metadata.name, x.n] };
    const print = async (output: string, headers = true) => {
      let out = '';
      const io: Io = { out: (t) => (out += t), err() {}, env: {}, cwd: '/' };
      await printList(io, items, { output, headers }, columns);
      return out;
    };
    assert.equal(await print('table'), 'NAME N\na    1\n');
    assert.match(await print('wide'), /^NAME N AGE\na {4}1 [56]s\n$/);
    assert.equal(await print('table', false), 'a 1\n');
    assert.deepEqual(JSON.parse(await print('json')), items);
    assert.equal(await print('yaml'), `- metadata:\n    name: a\n    creationTimestamp: ${items[0].metadata.creationTimestamp}\n  n: 1\n`);
    await assert.rejects(print('xml'), { code: 'FLINT_ERR_USAGE' });
  });
});
