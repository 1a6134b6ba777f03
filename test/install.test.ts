// Installing flint as a user would: the packed tarball installed with
// `npm install -g` into a prefix of its own, and `flint` run from its bin
// directory, outside the checkout, on the Node the PATH offers. Runtime
// dependencies come from the npm cache the checkout's install filled
// (--prefer-offline); the CLI itself needs none of them (it is bundled).
// And the lockfile: what a fresh clone's `npm install` would write is what
// is committed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { REPO, startServer, type TestServer } from './helpers/server.ts';

const VERSION = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')).version as string;

function npm(args: string[], cwd: string): string {
  const r = spawnSync('npm', [...args, '--no-audit', '--no-fund'], { cwd, encoding: 'utf8', timeout: 150_000 });
  assert.equal(r.status, 0, `npm ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

let work: string;
let bin: string;
let server: TestServer;

/** `flint` from the installed prefix, in a directory outside the checkout, with `nodeDir` first on the PATH. */
function installed(args: string[], nodeDir = path.dirname(process.execPath), env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(path.join(bin, 'flint'), args, {
    cwd: work,
    env: { ...server.env, PATH: [bin, nodeDir, process.env.PATH].join(path.delimiter), ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('flint installed from the packed tarball', { timeout: 240_000 }, () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-install-'));
    server = await startServer({ sets: ['executor.sandbox=none', 'executor.poolSize=0'] });
    // npm pack runs `prepare`, which builds the bundle that goes into the tarball.
    npm(['pack', '--pack-destination', work], REPO);
    const tarball = path.join(work, `flint-${VERSION}.tgz`);
    assert.ok(fs.existsSync(tarball), `${tarball} was packed`);
    npm(['install', '-g', '--prefix', path.join(work, 'prefix'), '--prefer-offline', tarball], work);
    bin = path.join(work, 'prefix', 'bin');
  });
  after(async () => {
    await server?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('runs `flint version` from outside the checkout, from its bundle', () => {
    const r = installed(['version'], undefined, { FLINT_DEBUG: '1' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `client: ${VERSION}\nserver: ${VERSION}\n`);
    assert.equal(r.stderr, '', 'the bundle, not the sources');
    assert.ok(!fs.realpathSync(path.join(bin, 'flint')).startsWith(REPO), 'the command is the installed copy');
  });

  it('talks to the control plane: fn list -o json parses', () => {
    const r = installed(['fn', 'list', '-o', 'json']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), []);
  });

  it('runs on the system Node too, older than the one the checkout pins', { skip: !fs.existsSync('/usr/bin/node') && 'no /usr/bin/node' }, () => {
    const r = installed(['version'], '/usr/bin');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^client: ${VERSION.replace(/\./g, '\\.')}\n`));
  });

  it('prints shell completion', () => {
    const r = installed(['completion', 'bash']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /complete -F _flint_complete flint/);
  });

  it('says where `flint server` runs instead of failing on TypeScript under node_modules', () => {
    const r = installed(['server']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^Error: flint server runs from a checkout of flint/);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });
});

describe('package-lock.json', () => {
  it("is what npm writes for package.json: a fresh clone's npm install leaves it unchanged", { timeout: 120_000 }, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-lock-'));
    try {
      for (const f of ['package.json', 'package-lock.json', '.npmrc']) fs.copyFileSync(path.join(REPO, f), path.join(dir, f));
      npm(['install', '--package-lock-only', '--ignore-scripts', '--prefer-offline'], dir);
      const committed = fs.readFileSync(path.join(REPO, 'package-lock.json'), 'utf8');
      assert.ok(fs.readFileSync(path.join(dir, 'package-lock.json'), 'utf8') === committed, 'npm rewrote package-lock.json: run npm install in the checkout and commit the lockfile it writes');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
