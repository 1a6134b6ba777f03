// Hostile archives against a running server: each of the corpus
// (src/archive/hostile-corpus.ts) is refused by `flint package create
// --deploy`, by the package API with the archive inline, and by the archive
// upload, with a 4xx JSON error naming the entry; and nothing changes in the
// data directory or in a sentinel directory outside it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ErrorCodes } from '../src/api/errors.ts';
import { hostileCorpus } from '../src/archive/hostile-corpus.ts';
import { flint, startServer, type TestServer } from './helpers/server.ts';

const CAP_MB = 8;
let server: TestServer;
let work: string;
let sentinel: string;

/** Every file and link under `dir` with size, mtime and target (directories by name: uploads come and go in a temporary one). */
function snapshot(dir: string, skip: (rel: string) => boolean = () => false): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const rel = path.relative(dir, p);
      if (skip(rel)) continue;
      const st = fs.lstatSync(p);
      if (st.isSymbolicLink()) out.push(`${rel} -> ${fs.readlinkSync(p)}`);
      else if (st.isDirectory()) {
        out.push(`${rel}/`);
        walk(p);
      } else out.push(`${rel} ${st.size} ${st.mtimeMs}`);
    }
  };
  walk(dir);
  return out;
}

// The store's own files change with its housekeeping; what it holds is checked through the API instead.
const notTheDb = (rel: string) => rel.startsWith('flint.db');
const state = () => ({ data: snapshot(server.dataDir, notTheDb), sentinel: snapshot(sentinel), root: snapshot(work, (rel) => rel === 'data' || rel.endsWith('.zip')) });

async function packages(): Promise<string[]> {
  const res = await fetch(`${server.controllerUrl}/v1/packages`);
  return ((await res.json()) as { items: { metadata: { name: string } }[] }).items.map((p) => p.metadata.name);
}

async function refusedJson(res: Response, code: string, entry: string, what: string) {
  const text = await res.text();
  assert.equal(res.status, ErrorCodes[code as keyof typeof ErrorCodes].status, `${what}: ${text}`);
  assert.ok(res.status >= 400 && res.status < 500, what);
  const body = JSON.parse(text);
  assert.equal(body.code, code, `${what}: ${text}`);
  assert.ok(body.message.includes(`'${entry}'`), `${what} names '${entry}': ${body.message}`);
}

describe('hostile archives at a running server', () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-hostile-sys-'));
    sentinel = path.join(work, 'sentinel');
    fs.mkdirSync(sentinel);
    fs.writeFileSync(path.join(sentinel, 'host-file'), 'untouched');
    // The data directory sits below `work`, so a '..' that got out of it would land where the snapshot looks.
    server = await startServer({ dataDir: path.join(work, 'a', 'b', 'c', 'data'), sets: [`archives.maxUnpackedMB=${CAP_MB}`] });
    const env = flint(server, ['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '0']);
    assert.equal(env.code, 0, env.stderr);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  hostileCorpus(CAP_MB * 1024 * 1024).forEach((h, i) => {
    it(`${h.name}: refused through the CLI, the package API and the upload (${h.code}), naming '${h.entry}', and nothing written`, async () => {
      const zip = path.join(work, `${h.name}.zip`);
      fs.writeFileSync(zip, h.zip);
      const before = state();
      const name = `hostile-${i}`;

      const cli = flint(server, ['package', 'create', '--name', name, '--env', 'nodejs', '--deploy', zip]);
      assert.equal(cli.code, ErrorCodes[h.code].exit, `exit code: ${cli.stdout}\n${cli.stderr}`);
      assert.ok(cli.stderr.includes(`'${h.entry}'`), `the CLI's error names '${h.entry}': ${cli.stderr}`);

      const inline = await fetch(`${server.controllerUrl}/v1/namespaces/default/packages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ metadata: { name }, spec: { environment: { name: 'nodejs' }, deployment: { type: 'literal', literal: h.zip.toString('base64') } } }),
      });
      // An inline archive over the embedded limit is refused for its size before it is looked at.
      if (h.zip.length <= 256 * 1024) await refusedJson(inline, h.code, h.entry, 'package API');
      else assert.equal(inline.status, 400, await inline.text());

      const upload = await fetch(`${server.controllerUrl}/v1/archives`, { method: 'POST', headers: { 'content-type': 'application/zip' }, body: h.zip });
      await refusedJson(upload, h.code, h.entry, 'archive upload');

      assert.deepEqual(await packages(), []);
      assert.deepEqual(state(), before);
      assert.equal(fs.readFileSync(path.join(sentinel, 'host-file'), 'utf8'), 'untouched');
    });
  });
});
