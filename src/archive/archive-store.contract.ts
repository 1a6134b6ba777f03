// The contract every ArchiveStore implementation meets.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { FlintError } from '../api/errors.ts';
import type { ArchiveStore } from './store.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const chunks = (b: Buffer) => Readable.from([b.subarray(0, 3), b.subarray(3)]);

async function all(store: ArchiveStore): Promise<string[]> {
  const out: string[] = [];
  for await (const i of store.list()) out.push(i.sha256);
  return out.sort();
}

export function archiveStoreContract(name: string, make: () => ArchiveStore): void {
  describe(`ArchiveStore contract: ${name}`, () => {
    it('stores by content, gives the bytes back, lists and deletes', async () => {
      const s = make();
      const bytes = Buffer.from('hello archive');
      const info = await s.put(chunks(bytes));
      assert.equal(info.sha256, sha(bytes));
      assert.equal(info.size, bytes.length);
      assert.deepEqual(fs.readFileSync(await s.pathOf(info.sha256)), bytes);
      const back: Buffer[] = [];
      for await (const c of await s.open(info.sha256)) back.push(c as Buffer);
      assert.deepEqual(Buffer.concat(back), bytes);
      assert.deepEqual(await all(s), [info.sha256]);
      assert.equal((await s.get(info.sha256))?.size, bytes.length);
      assert.equal(await s.delete(info.sha256), true);
      assert.equal(await s.delete(info.sha256), false);
      assert.equal(await s.get(info.sha256), undefined);
      await assert.rejects(s.pathOf(info.sha256), { code: 'FLINT_ERR_NOT_FOUND' });
    });

    it('is idempotent, also under concurrent puts of the same content', async () => {
      const s = make();
      const bytes = Buffer.from('same content');
      const infos = await Promise.all([1, 2, 3, 4].map(() => s.put(chunks(bytes))));
      assert.ok(infos.every((i) => i.sha256 === sha(bytes)));
      assert.deepEqual(await all(s), [sha(bytes)]);
    });

    it('keeps nothing when the checksum does not match or the size cap is passed', async () => {
      const s = make();
      const bytes = Buffer.from('checked content');
      await assert.rejects(s.put(chunks(bytes), { expectedSha256: 'a'.repeat(64) }), (e: any) => e.code === 'FLINT_ERR_BAD_ARCHIVE' && /expected sha256 a{64}, got [0-9a-f]{64}/.test(e.message));
      await assert.rejects(s.put(chunks(bytes), { maxBytes: 4 }), { code: 'FLINT_ERR_PAYLOAD_TOO_LARGE' });
      assert.deepEqual(await all(s), []);
      assert.equal((await s.put(chunks(bytes), { expectedSha256: sha(bytes) })).sha256, sha(bytes));
    });

    it('keeps nothing when the check refuses the complete bytes', async () => {
      const s = make();
      const bytes = Buffer.from('inspected content');
      let seen: Buffer | undefined;
      const refuse = async (file: string) => {
        seen = fs.readFileSync(file);
        throw new FlintError('FLINT_ERR_BAD_ARCHIVE', 'refused by the check');
      };
      await assert.rejects(s.put(chunks(bytes), { check: refuse }), /refused by the check/);
      assert.deepEqual(seen, bytes, 'the check saw every byte');
      assert.deepEqual(await all(s), []);
    });

    it('refuses malformed ids', async () => {
      const s = make();
      await assert.rejects(s.get('../../etc/passwd'), { code: 'FLINT_ERR_VALIDATION' });
      await assert.rejects(s.put(chunks(Buffer.from('x')), { expectedSha256: 'XYZ' }), { code: 'FLINT_ERR_VALIDATION' });
    });
  });
}
