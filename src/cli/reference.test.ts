import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it } from 'node:test';
import { REFERENCE_FILE, renderReference } from './reference.ts';

it('docs/cli-reference.md matches the command definitions', async () => {
  const committed = fs.existsSync(REFERENCE_FILE) ? fs.readFileSync(REFERENCE_FILE, 'utf8') : '';
  assert.equal(await renderReference(), committed, 'docs/cli-reference.md is stale: run `npm run generate` and commit the result');
});
