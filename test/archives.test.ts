// Archives and storage hygiene end to end (issue 27, item 6): `flint archive
// upload|list|get-url|download|delete`, `pkg list --orphan --status`, `pkg
// delete --orphan` and `spec apply --dry-run`, with the real CLI against a
// real server, their refusals, and their -o json parsed.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

const run = (args: string[], cwd = work) => flint(server, args, { cwd });

function ok(args: string[], cwd = work): string {
  const r = run(args, cwd);
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

interface ArchiveItem {
  sha256: string;
  url: string;
  size: number;
  createdAt: string;
  packages: string[];
}

const archives = () => JSON.parse(ok(['archive', 'list', '-o', 'json'])) as ArchiveItem[];
const names = (json: string) => (JSON.parse(json) as Array<{ metadata: { name: string } }>).map((x) => x.metadata.name).sort();

before(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-archives-'));
  server = await startServer();
  // No warm workers: nothing here runs a function.
  ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '0']);
});
after(async () => {
  await server?.stop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('flint archive', () => {
  it('uploads, lists, gives the URL of, downloads and deletes an archive', async () => {
    const bytes = randomBytes(4096);
    fs.writeFileSync(path.join(work, 'data.bin'), bytes);
    const id = sha(bytes);
    assert.equal(ok(['archive', 'upload', '--name', 'data.bin']), `File successfully uploaded with ID: ${id}\n`);
    assert.deepEqual(JSON.parse(ok(['archive', 'upload', '--name', 'data.bin', '-o', 'json'])), { url: `/v1/archives/${id}`, checksum: { type: 'sha256', sum: id }, size: bytes.length });

    const item = archives().find((a) => a.sha256 === id);
    assert.ok(item);
    assert.deepEqual({ ...item, createdAt: '' }, { sha256: id, url: `/v1/archives/${id}`, size: bytes.length, createdAt: '', packages: [] });
    assert.ok(!Number.isNaN(Date.parse(item.createdAt)));
    const table = ok(['archive', 'list']).split('\n');
    assert.match(table[0], /^ID +SIZE +PACKAGES$/);
    assert.ok(table.some((l) => l.startsWith(`${id} 4096 `) && l.endsWith('<none>')), table.join('\n'));
    assert.ok(ok(['archive', 'list', '-o', 'wide']).split('\n')[0].endsWith('AGE'));
    assert.ok(!ok(['archive', 'list', '--no-headers']).startsWith('ID'));

    const url = ok(['archive', 'get-url', '--id', id]);
    assert.equal(url, `URL: ${server.controllerUrl}/v1/archives/${id}\n`);
    const fetched = Buffer.from(await (await fetch(url.slice(5).trim())).arrayBuffer());
    assert.deepEqual(fetched, bytes);

    assert.equal(ok(['archive', 'download', '--id', id, '-o', 'copy.bin']), 'File download complete. File name: copy.bin\n');
    assert.deepEqual(fs.readFileSync(path.join(work, 'copy.bin')), bytes);
    // By default the file is named after the archive; its URL is an id too.
    assert.equal(ok(['archive', 'download', '--id', `/v1/archives/${id}`]), `File download complete. File name: ${id}\n`);
    assert.deepEqual(fs.readFileSync(path.join(work, id)), bytes);

    assert.equal(ok(['archive', 'delete', '--id', id]), `Deleted archive with id: ${id}\n`);
    assert.equal(archives().find((a) => a.sha256 === id), undefined);
  });

  it('refuses a bad id before any request, and a missing archive with 404 and a non-zero exit', async () => {
    for (const cmd of ['delete', 'get-url', 'download']) {
      for (const bad of ['nothex', '../../flint.db', `${'a'.repeat(63)}/`, '/v1/archives/../../x']) {
        const r = run(['archive', cmd, '--id', bad]);
        assert.equal(r.code, 2, `${cmd} ${bad}: ${r.stderr}`);
        assert.match(r.stderr, /^Error: --id '.*' is not an archive id: give its sha256 \(64 hex digits\) or its URL \/v1\/archives\/<sha256>\n$/);
      }
    }
    const missing = 'b'.repeat(64);
    const before = fs.readdirSync(work).sort();
    for (const cmd of ['delete', 'get-url', 'download']) {
      const r = run(['archive', cmd, '--id', missing]);
      assert.equal(r.code, 4, `${cmd}: ${r.stderr}`);
      assert.equal(r.stderr, `Error: archive ${missing} not found\n`);
    }
    assert.deepEqual(fs.readdirSync(work).sort(), before, 'a failed download leaves no file');
    const res = await fetch(`${server.controllerUrl}/v1/archives/${missing}`);
    assert.equal(res.status, 404);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(await res.json(), { code: 'FLINT_ERR_NOT_FOUND', message: `archive ${missing} not found` });
    const bad = await fetch(`${server.controllerUrl}/v1/archives/..%2F..%2Fflint.db`, { method: 'DELETE' });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { code: string }).code, 'FLINT_ERR_VALIDATION');
  });

  it('refuses to delete an archive a package uses, naming the package (409)', async () => {
    // Over 256 KiB zipped (random bytes do not compress): the package's code goes to the store, not into the package.
    fs.writeFileSync(path.join(work, 'big.bin'), randomBytes(300 * 1024));
    ok(['pkg', 'create', '--name', 'big-pkg', '--env', 'nodejs', '--deploy', 'big.bin']);
    const pkg = JSON.parse(ok(['pkg', 'info', '--name', 'big-pkg', '-o', 'json'])) as { spec: { deployment: { url: string; checksum: { sum: string } } } };
    const id = pkg.spec.deployment.checksum.sum;
    assert.equal(pkg.spec.deployment.url, `/v1/archives/${id}`);
    assert.deepEqual(archives().find((a) => a.sha256 === id)?.packages, ['default/big-pkg']);
    assert.ok(!ok(['archive', 'list', '--orphan', '-o', 'json']).includes(id));

    const r = run(['archive', 'delete', '--id', id]);
    assert.equal(r.code, 5, r.stderr);
    assert.equal(r.stderr, `Error: archive ${id} is used by package 'default/big-pkg': delete or update the package first\n`);
    const res = await fetch(`${server.controllerUrl}/v1/archives/${id}`, { method: 'DELETE' });
    assert.equal(res.status, 409);
    assert.equal(((await res.json()) as { code: string }).code, 'FLINT_ERR_IN_USE');
    assert.ok(archives().some((a) => a.sha256 === id), 'still stored');

    ok(['pkg', 'delete', '--name', 'big-pkg']);
    ok(['archive', 'delete', '--id', id]);
  });
});

describe('orphan packages', () => {
  it('pkg list --orphan --status shows packages no function uses; pkg delete --orphan deletes them, and only them', () => {
    fs.writeFileSync(path.join(work, 'fn.js'), 'module.exports = async () => ({ status: 200, body: "x" });\n');
    for (const p of ['lonely-a', 'lonely-b', 'used-pkg']) ok(['pkg', 'create', '--name', p, '--env', 'nodejs', '--code', 'fn.js']);
    ok(['fn', 'create', '--name', 'user', '--pkg', 'used-pkg']);

    assert.deepEqual(names(ok(['pkg', 'list', '-o', 'json'])), ['lonely-a', 'lonely-b', 'used-pkg']);
    assert.deepEqual(names(ok(['pkg', 'list', '--orphan', '-o', 'json'])), ['lonely-a', 'lonely-b']);
    assert.deepEqual(names(ok(['pkg', 'list', '--orphan', '--status', 'succeeded', '-o', 'json'])), ['lonely-a', 'lonely-b']);
    assert.deepEqual(names(ok(['pkg', 'list', '--status', 'succeeded', '-o', 'json'])), ['lonely-a', 'lonely-b', 'used-pkg']);
    assert.deepEqual(names(ok(['pkg', 'list', '--status', 'failed', '-o', 'json'])), []);
    const table = ok(['pkg', 'list', '--orphan']).trimEnd().split('\n');
    assert.match(table[0], /^NAME +BUILD_STATUS +ENV +LASTUPDATEDAT +NAMESPACE$/);
    assert.deepEqual(table.slice(1).map((l) => l.split(' ')[0]).sort(), ['lonely-a', 'lonely-b']);
    const badStatus = run(['pkg', 'list', '--status', 'done']);
    assert.equal(badStatus.code, 2);
    assert.match(badStatus.stderr, /pending, running, succeeded, failed, none/);

    const none = run(['pkg', 'delete']);
    assert.equal(none.code, 2);
    assert.equal(none.stderr, 'Error: need --name or --orphan flag\n');
    const out = ok(['pkg', 'delete', '--orphan']).split('\n');
    assert.deepEqual(out.filter((l) => l.startsWith('Package ')).sort(), ["Package 'lonely-a' deleted", "Package 'lonely-b' deleted"]);
    assert.ok(out.includes('Orphan packages deleted'));
    assert.deepEqual(names(ok(['pkg', 'list', '-o', 'json'])), ['used-pkg']);
    assert.deepEqual(names(ok(['pkg', 'list', '--orphan', '-o', 'json'])), []);
    ok(['fn', 'delete', '--name', 'user']);
    ok(['pkg', 'delete', '--name', 'used-pkg']);
  });
});

describe('spec apply --dry-run', () => {
  const SPECS = (timeout: number, withRoute: boolean) => `apiVersion: flint.dev/v1
kind: Environment
metadata: {name: dry-node}
spec: {runtime: {image: flint/node-env}, poolsize: 0}
---
kind: ArchiveUploadSpec
name: dry-code
include: ["src/*"]
---
apiVersion: flint.dev/v1
kind: Package
metadata: {name: dry-pkg}
spec:
  environment: {name: dry-node}
  deployment: {type: url, url: "archive://dry-code"}
---
apiVersion: flint.dev/v1
kind: Function
metadata: {name: dry-fn, labels: {team: a}}
spec:
  environment: {name: dry-node}
  package: {packageref: {name: dry-pkg}, functionName: hello}
  functionTimeout: ${timeout}
${
  withRoute
    ? `---
apiVersion: flint.dev/v1
kind: HTTPTrigger
metadata: {name: dry-route}
spec: {relativeurl: /dry, methods: [GET], functionref: {type: name, name: dry-fn}}
`
    : ''
}`;

  it('prints what would be created, updated (with the fields) and deleted, and writes and uploads nothing', () => {
    const dir = path.join(work, 'dry');
    fs.mkdirSync(path.join(dir, 'src'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'src', 'hello.js'), 'exports.hello = async () => ({ status: 200, body: "dry" });\n');
    // Big enough that apply would upload it.
    fs.writeFileSync(path.join(dir, 'src', 'blob.txt'), randomBytes(300 * 1024).toString('base64'));
    ok(['spec', 'init'], dir);
    const specFile = path.join(dir, 'specs', 'app.yaml');
    fs.writeFileSync(specFile, SPECS(60, true));
    const stored = () => archives().map((a) => a.sha256).sort();
    const archivesBefore = stored();

    const first = ok(['spec', 'apply', '--dry-run'], dir);
    assert.equal(
      first,
      '1 environment created: dry-node\n1 package created: dry-pkg\n1 function created: dry-fn\n1 httptrigger created: dry-route\n(dry run - no changes made)\n',
    );
    assert.deepEqual(names(ok(['fn', 'list', '-o', 'json'])), []);
    assert.equal(run(['env', 'get', '--name', 'dry-node']).code, 4);
    assert.deepEqual(stored(), archivesBefore, 'nothing uploaded');

    ok(['spec', 'apply'], dir);
    const pkg = JSON.parse(ok(['pkg', 'info', '--name', 'dry-pkg', '-o', 'json'])) as { spec: { deployment: { type: string; checksum: { sum: string } } } };
    assert.equal(pkg.spec.deployment.type, 'url', 'the code is big enough to be uploaded');
    assert.deepEqual(stored(), [...archivesBefore, pkg.spec.deployment.checksum.sum].sort(), 'apply uploaded what the dry run did not');
    assert.equal(ok(['spec', 'apply', '--dry-run'], dir), 'nothing to change (4 resources up to date)\n(dry run - no changes made)\n');

    fs.writeFileSync(specFile, SPECS(30, false).replace('labels: {team: a}', 'labels: {team: b}'));
    const second = ok(['spec', 'apply', '--dry-run', '--delete'], dir);
    assert.equal(second, '1 function updated: dry-fn\n1 httptrigger deleted: dry-route\n  function dry-fn: metadata.labels.team, spec.functionTimeout\n(dry run - no changes made)\n');
    const fn = JSON.parse(ok(['fn', 'getmeta', '--name', 'dry-fn', '-o', 'json'])) as { metadata: { labels: Record<string, string> }; spec: { functionTimeout: number } };
    assert.equal(fn.spec.functionTimeout, 60, 'not updated');
    assert.equal(fn.metadata.labels.team, 'a');
    assert.deepEqual(names(ok(['route', 'list', '-o', 'json'])), ['dry-route'], 'not deleted');

    // A dry run refuses what apply would refuse.
    fs.writeFileSync(specFile, SPECS(30, true).replace('name: dry-route', 'name: dry-route-2').replace('relativeurl: /dry,', 'relativeurl: /dry2,'));
    ok(['route', 'create', '--name', 'squatter', '--url', '/dry2', '--function', 'dry-fn']);
    const clash = run(['spec', 'apply', '--dry-run'], dir);
    assert.equal(clash.code, 5, clash.stderr);
    assert.match(clash.stderr, /same host, URL and method/);
    ok(['route', 'delete', '--name', 'squatter']);
    ok(['spec', 'destroy'], dir);
  });
});
