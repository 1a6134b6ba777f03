import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, it } from 'node:test';
import { archiveStoreContract } from './archive-store.contract.ts';
import { LocalArchiveStore } from './local-store.ts';

const dirs: string[] = [];
const make = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-as-'));
  dirs.push(d);
  return new LocalArchiveStore(d);
};
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

archiveStoreContract('local', make);

it('sweeps temporary files a crash left behind, and only old ones', async () => {
  const s = make();
  const tmpDir = path.join(dirs.at(-1) as string, 'tmp');
  fs.writeFileSync(path.join(tmpDir, 'old'), 'x');
  fs.writeFileSync(path.join(tmpDir, 'new'), 'x');
  const past = new Date(Date.now() - 2 * 3600_000);
  fs.utimesSync(path.join(tmpDir, 'old'), past, past);
  assert.equal(await s.sweepTemp(), 1);
  assert.deepEqual(fs.readdirSync(tmpDir), ['new']);
});
