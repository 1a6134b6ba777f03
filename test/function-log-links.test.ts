// A running server never follows a link it did not make into a function's
// log: with `logs/default/<fn>.log` replaced by a link to a file outside the
// data directory (as the archive attack of issue 22 planted one), the
// function's stdout is not appended to that file; the server says why, and
// `flint fn log` refuses to serve the link. A function beside it logs as usual.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../src/testing/eventually.ts';
import { flint, startServer, type TestServer } from './helpers/server.ts';

let server: TestServer;
let work: string;

function ok(args: string[]): string {
  const r = flint(server, args, { cwd: work });
  assert.equal(r.code, 0, `flint ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function createFn(name: string) {
  const file = path.join(work, `${name}.js`);
  fs.writeFileSync(file, `module.exports = async () => { console.log('stdout-of-${name}'); return { status: 200, body: 'ok' }; };\n`);
  ok(['fn', 'create', '--name', name, '--env', 'nodejs', '--code', file]);
}

describe('function logs and planted links', () => {
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-fnlog-sys-'));
    server = await startServer();
    ok(['env', 'create', '--name', 'nodejs', '--image', 'flint/node-env', '--poolsize', '1']);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it("refuses a link in place of a function's log file and writes nothing through it", async () => {
    const victim = path.join(work, 'victim');
    fs.writeFileSync(victim, 'host file\n');
    const logDir = path.join(server.dataDir, 'logs', 'default');
    fs.mkdirSync(logDir, { recursive: true });
    fs.symlinkSync(victim, path.join(logDir, 'planted.log'));
    createFn('planted');
    createFn('plain');

    assert.equal(ok(['fn', 'test', '--name', 'plain']), 'ok');
    assert.equal(ok(['fn', 'test', '--name', 'planted']), 'ok');
    // The neighbour's line reaching its log shows output is being written.
    await eventually(() => ok(['fn', 'log', '--name', 'plain']).includes('stdout-of-plain'), "the plain function's stdout in its log");
    await eventually(() => /refusing to write this function's log[\s\S]*planted\.log: it is a symbolic link|planted\.log: it is a symbolic link[\s\S]*refusing to write this function's log/.test(server.output()), 'the server to say it refused the planted log');

    assert.equal(fs.readFileSync(victim, 'utf8'), 'host file\n');
    assert.ok(fs.lstatSync(path.join(logDir, 'planted.log')).isSymbolicLink(), 'the link is left as it was');
    const log = flint(server, ['fn', 'log', '--name', 'planted'], { cwd: work });
    assert.notEqual(log.code, 0, log.stdout);
    assert.match(log.stderr, /planted\.log: it is a symbolic link/);
  });
});
