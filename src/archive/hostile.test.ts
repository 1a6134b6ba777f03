// The hostile corpus against inspection and, bypassing it, against
// extraction itself: each archive is refused naming its entry, and nothing
// is written anywhere, inside the destination's parent or above it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fsTree } from './fs-tree.ts';
import { hostileCorpus } from './hostile-corpus.ts';
import { rawZipOf } from './testing.ts';
import { linkProblem } from './tree-model.ts';
import { extractZip } from './zip-extract.ts';
import { inspectZip } from './zip-inspect.ts';

const CAP = 8 * 1024 * 1024;
const LIMITS = { maxEntries: 1000, maxBytes: CAP };

let root: string;
// Deep enough that every '..' in the corpus still lands inside `root`, where the snapshot sees it.
let parent: string;
let n = 0;
before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-hostile-'));
  parent = path.join(root, 'l1', 'l2', 'l3', 'l4', 'l5', 'l6', 'l7', 'l8', 'l9', 'l10', 'l11', 'l12', 'l13', 'work');
  fs.mkdirSync(parent, { recursive: true });
  fs.mkdirSync(path.join(root, 'sentinel'));
  fs.writeFileSync(path.join(root, 'sentinel', 'file'), 'untouched');
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

/** Every name under `dir` with its type, size, mtime and link target; `parent`'s own mtime is left out (the temporary tree comes and goes there). */
function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const st = fs.lstatSync(p);
      const rel = path.relative(root, p);
      if (st.isSymbolicLink()) out.push(`${rel} -> ${fs.readlinkSync(p)}`);
      else if (st.isDirectory()) {
        out.push(`${rel}/ ${p === parent ? '' : st.mtimeMs}`);
        walk(p);
      } else out.push(`${rel} ${st.size} ${st.mtimeMs}`);
    }
  };
  walk(dir);
  return out;
}

const names = (msg: string, entry: string) => assert.ok(msg.includes(`'${entry}'`), `the message names '${entry}': ${msg}`);

describe('hostile archives', () => {
  for (const h of hostileCorpus(CAP)) {
    it(`${h.name}: inspection refuses it (${h.code}), naming '${h.entry}'`, async () => {
      const zip = path.join(root, `${h.name}.zip`);
      fs.writeFileSync(zip, h.zip);
      for (const input of [h.zip, zip]) {
        await assert.rejects(inspectZip(input, LIMITS), (e: any) => {
          assert.equal(e.code, h.code, e.message);
          names(e.message, h.entry);
          return true;
        });
      }
    });

    it(`${h.name}: extraction alone refuses it and writes nothing anywhere`, async () => {
      const zip = path.join(root, `${h.name}.zip`);
      fs.writeFileSync(zip, h.zip);
      const before = snapshot(root);
      const dest = path.join(parent, `out-${++n}`);
      await assert.rejects(extractZip(zip, dest, LIMITS), (e: any) => {
        assert.equal(e.code, h.code, e.message);
        names(e.message, h.entry);
        return true;
      });
      assert.deepEqual(snapshot(root), before);
      assert.equal(fs.readFileSync(path.join(root, 'sentinel', 'file'), 'utf8'), 'untouched');
    });
  }
});

describe('too many entries', () => {
  it('is refused by inspection and by extraction, writing nothing', async () => {
    const zip = path.join(root, 'many.zip');
    fs.writeFileSync(zip, rawZipOf(Array.from({ length: LIMITS.maxEntries + 1 }, (_, i) => ({ name: `e${i}` }))));
    await assert.rejects(inspectZip(zip, LIMITS), (e: any) => e.code === 'FLINT_ERR_PAYLOAD_TOO_LARGE' && /more than 1000 entries/.test(e.message));
    const before = snapshot(root);
    await assert.rejects(extractZip(zip, path.join(parent, 'many'), LIMITS), (e: any) => e.code === 'FLINT_ERR_PAYLOAD_TOO_LARGE' && /more than 1000 entries/.test(e.message));
    assert.deepEqual(snapshot(root), before);
  });
});

describe('archives the model must keep accepting', () => {
  const link = (name: string, target: string) => ({ name, data: Buffer.from(target), symlink: true });
  const file = (name: string) => ({ name, data: Buffer.from(name) });

  it('unpacks in-tree links, links to links, a link to the root, a dangling link and non-canonical names used once', async () => {
    const zip = path.join(root, 'fine.zip');
    fs.writeFileSync(
      zip,
      rawZipOf([
        { name: './' },
        file('./index.js'),
        file('node_modules/pkg/bin/cli'),
        { name: 'node_modules/' },
        link('node_modules/.bin/cli', '../pkg/bin/cli'),
        link('alias', 'node_modules/.bin/cli'),
        link('self', '.'),
        link('lib/up', '..'),
        link('dangling', 'not-there'),
        file('lib//x.js'),
      ]),
    );
    await inspectZip(zip, LIMITS);
    const dest = path.join(parent, 'fine');
    await extractZip(zip, dest, LIMITS);
    assert.equal(fs.readFileSync(path.join(dest, 'alias'), 'utf8'), 'node_modules/pkg/bin/cli');
    assert.equal(fs.readFileSync(path.join(dest, 'self', 'lib', 'up', 'index.js'), 'utf8'), './index.js');
    assert.equal(fs.readlinkSync(path.join(dest, 'dangling')), 'not-there');
    assert.equal(fs.readFileSync(path.join(dest, 'lib', 'x.js'), 'utf8'), 'lib//x.js');
  });
});

describe('links resolved on disk (what extraction checks after making them)', () => {
  it('follows the links of a real tree: a chain through `.` leaves it, a loop never ends', () => {
    const tree = path.join(root, 'disk');
    fs.mkdirSync(path.join(tree, 's'), { recursive: true });
    fs.symlinkSync('.', path.join(tree, 's', 'd'));
    fs.symlinkSync('d/../..', path.join(tree, 's', 'x'));
    fs.symlinkSync('loop', path.join(tree, 'loop'));
    fs.symlinkSync('s/d/d/d', path.join(tree, 'fine'));
    const view = fsTree(tree);
    assert.match(linkProblem(view, 's/x', ['s', 'x'], 'd/../..') ?? '', /outside the archive/);
    assert.match(linkProblem(view, 'loop', ['loop'], 'loop') ?? '', /a loop of links/);
    assert.equal(linkProblem(view, 'fine', ['fine'], 's/d/d/d'), undefined);
  });
});
