// Which stored archives a package's archive reference stands for: the
// archive in a control-plane URL, the checksum it pins, and the hash of an
// embedded literal (literals are put in the store when they are used).
import { createHash } from 'node:crypto';
import { storedArchiveSha } from '../api/build-command.ts';
import type { Archive } from '../api/kinds.ts';

export function archiveShas(a: Archive | undefined): string[] {
  if (!a) return [];
  const out: string[] = [];
  if (a.checksum?.sum) out.push(a.checksum.sum);
  if (a.type === 'url' && a.url) {
    const sha = storedArchiveSha(a.url);
    if (sha) out.push(sha);
  }
  if (a.type === 'literal' && a.literal !== undefined) out.push(createHash('sha256').update(Buffer.from(a.literal, 'base64')).digest('hex'));
  return out;
}
