// Function logs where something planted a link: at the file, or at the
// namespace's directory. Each is refused, said once, and nothing is written
// through it; a plain log keeps working beside it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dataLayout, functionLogFile } from '../config/layout.ts';
import { FunctionLogs } from './function-log.ts';

let dir: string;
let outside: string;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-fnlog-'));
  outside = path.join(dir, 'outside');
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'victim'), 'precious\n');
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('function logs', () => {
  it('appends to a plain log, and refuses a link at the log file or at its directory, writing nothing through either', async () => {
    const layout = dataLayout(path.join(dir, 'data'));
    fs.mkdirSync(path.join(layout.logs, 'ns'), { recursive: true });
    fs.symlinkSync(path.join(outside, 'victim'), functionLogFile(layout, 'ns', 'linked'));
    fs.symlinkSync(outside, path.join(layout.logs, 'evil-ns'));
    const refused: string[] = [];
    const logs = new FunctionLogs(layout, (ns, name, err) => refused.push(`${ns}/${name}: ${(err as any).code} ${err.message}`));
    for (let i = 0; i < 3; i++) {
      logs.write('ns', 'plain', 'stdout', `line ${i}`);
      logs.write('ns', 'linked', 'stdout', 'root write attempt');
      logs.write('evil-ns', 'fn', 'stdout', 'planted directory');
    }
    await logs.closeAll();
    assert.equal(refused.length, 2, `said once per function: ${refused.join('\n')}`);
    assert.match(refused[0], /^ns\/linked: FLINT_ERR_UNSAFE_PATH .*linked\.log: it is a symbolic link/);
    assert.match(refused[1], /^evil-ns\/fn: FLINT_ERR_UNSAFE_PATH .*evil-ns: it is a symbolic link/);
    assert.equal(fs.readFileSync(path.join(outside, 'victim'), 'utf8'), 'precious\n');
    assert.deepEqual(fs.readdirSync(outside), ['victim']);
    assert.match(fs.readFileSync(functionLogFile(layout, 'ns', 'plain'), 'utf8'), /\[stdout\] line 0\n.*\[stdout\] line 1\n.*\[stdout\] line 2\n$/);
  });

  it('tries a refused log again after it is closed (the link removed meanwhile)', async () => {
    const layout = dataLayout(path.join(dir, 'data2'));
    fs.mkdirSync(path.join(layout.logs, 'ns'), { recursive: true });
    const file = functionLogFile(layout, 'ns', 'fn');
    fs.symlinkSync(path.join(outside, 'victim'), file);
    let refusals = 0;
    const logs = new FunctionLogs(layout, () => refusals++);
    logs.write('ns', 'fn', 'stdout', 'dropped');
    fs.unlinkSync(file);
    logs.write('ns', 'fn', 'stdout', 'still dropped until closed');
    logs.close('ns', 'fn');
    logs.write('ns', 'fn', 'stdout', 'kept');
    await logs.closeAll();
    assert.equal(refusals, 1);
    assert.match(fs.readFileSync(file, 'utf8'), /^\S+ \[stdout\] kept\n$/);
  });

  it("tags a runtime's marked line with its request and every line with its instance; the server's own lines keep their text", async () => {
    const layout = dataLayout(path.join(dir, 'data3'));
    const logs = new FunctionLogs(layout);
    logs.write('ns', 'fn', 'stdout', '\x1ereq-1\x1ehello', 'node-ab12');
    logs.write('ns', 'fn', 'stderr', '\x1enot an id\x1eboom', 'node-ab12');
    logs.write('ns', 'fn', 'flint', '\x1ereq-1\x1eforged by nobody');
    await logs.closeAll();
    const lines = fs.readFileSync(functionLogFile(layout, 'ns', 'fn'), 'utf8').split('\n');
    assert.match(lines[0], /^\S+ instance=node-ab12 request=req-1 \[stdout\] hello$/);
    assert.match(lines[1], /^\S+ instance=node-ab12 \[stderr\] \x1enot an id\x1eboom$/);
    assert.match(lines[2], /^\S+ \[flint\] \x1ereq-1\x1eforged by nobody$/);
  });
});
