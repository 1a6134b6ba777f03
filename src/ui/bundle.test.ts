// The committed dashboard (src/ui/static) is what `npm run build:ui` makes
// of ui/ now: built again here, in memory, and compared byte for byte, so
// a change to the front end without a rebuild (or a build that is not
// deterministic) fails. Also holds the bundle to its size budget.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { buildUi, UI_OUT } from '../../ui/build.ts';

/** The ceiling for the framework runtime; the whole page stays well under it. */
const MAX_GZIPPED = 100 * 1024;

describe('dashboard bundle', () => {
  it('is committed as built, and built the same twice', async () => {
    const built = await buildUi();
    const again = await buildUi();
    const committed = fs.readdirSync(UI_OUT).sort();
    assert.deepEqual(committed, [...built.keys()].sort(), 'the files in src/ui/static: run npm run build:ui');
    for (const [name, body] of built) {
      assert.ok(body.equals(again.get(name)!), `${name} differs between two builds`);
      assert.ok(body.equals(fs.readFileSync(path.join(UI_OUT, name))), `src/ui/static/${name} is not what ui/ builds: run npm run build:ui`);
    }
  });

  it('stays small', async () => {
    let total = 0;
    for (const name of fs.readdirSync(UI_OUT)) total += gzipSync(fs.readFileSync(path.join(UI_OUT, name)), { level: 9 }).length;
    assert.ok(total < MAX_GZIPPED, `the dashboard is ${total} bytes gzipped`);
  });
});
