// For tests: archives an attacker would send, each with the entry its
// refusal must name. The unit tests feed them to inspection and straight to
// extraction; the system test uploads them through the CLI and the API.
// Built byte by byte (testing.ts) since zip tools refuse to write most.
import { type RawEntry, rawZipOf } from './testing.ts';

export interface Hostile {
  /** Short and file-name safe. */
  name: string;
  zip: Buffer;
  code: 'FLINT_ERR_BAD_ARCHIVE' | 'FLINT_ERR_PAYLOAD_TOO_LARGE';
  /** The refusal's message names this entry. */
  entry: string;
}

const link = (name: string, target: string): RawEntry => ({ name, data: Buffer.from(target), symlink: true });
const file = (name: string, text = 'payload'): RawEntry => ({ name, data: Buffer.from(text) });
const dir = (name: string): RawEntry => ({ name });
const MIB = 1024 * 1024;

/** The corpus, its bombs sized against `maxBytes` (the unpacked cap the refusing side applies). */
export function hostileCorpus(maxBytes: number): Hostile[] {
  const bad = (name: string, entry: string, entries: RawEntry[]): Hostile => ({ name, zip: rawZipOf(entries), code: 'FLINT_ERR_BAD_ARCHIVE', entry });
  const deep = 'a/'.repeat(12);
  // Enough one-MiB entries of zeros, each honest about its size, to pass the cap together.
  const many = Math.floor(maxBytes / MIB) + 2;
  return [
    // The reported chain: `a -> .` makes a/a/a the root, so ../../.. leaves it.
    bad('chain-through-dot', 'a/a/a/x', [link('a', '.'), link('a/a/a/x', '../../..')]),
    bad('chain-deep', `${deep}up`, [link('a', '.'), link(`${deep}up`, '../'.repeat(12)), link('up/logs/ns/fn.log', '../../../../private')]),
    bad('file-through-link', 'a/evil.txt', [link('a', '.'), file('a/evil.txt')]),
    bad('dir-link-then-file', 'd/f', [dir('sub/'), link('d', 'sub'), file('d/f')]),
    bad('file-then-link-over-its-dir', 'dir', [file('dir/a.txt'), link('dir', '.')]),
    bad('link-to-outside-dir-then-file', 'out/x', [link('out', '..'), file('out/x')]),
    // Each link fine by its letters; together s/d is s, so s/d/../.. is the root's parent.
    bad('link-made-unsafe-by-a-later-link', 's/x', [link('s/x', 'd/../..'), link('s/d', '.')]),
    bad('self-loop', 'loop', [link('loop', 'loop')]),
    bad('mutual-loop', 'ping', [link('ping', 'pong'), link('pong', 'ping')]),
    bad('absolute-target', 'passwd', [link('passwd', '/etc/passwd')]),
    bad('dotdot-target', 'up', [link('up', '..')]),
    bad('nested-dotdot-target', 'd/e/up', [link('d/e/up', '../../../x')]),
    bad('zip-slip', '../evil', [file('../evil')]),
    bad('nested-zip-slip', 'a/../../evil', [file('a/../../evil')]),
    bad('absolute-name', '/tmp/evil', [file('/tmp/evil')]),
    bad('backslash', 'a\\evil.txt', [file('a\\evil.txt')]),
    bad('backslash-slip', '..\\evil', [file('..\\evil')]),
    bad('nul-byte', 'a\\0.txt', [file('a\0.txt')]),
    bad('dup-dot-slash', './a.txt', [file('a.txt'), file('./a.txt')]),
    bad('dup-double-slash', 'a//b', [file('a/b'), file('a//b')]),
    bad('dup-dot-component', 'a/./b', [file('a/b'), file('a/./b')]),
    bad('dup-exact', 'same.txt', [file('same.txt', '1'), file('same.txt', '2')]),
    bad('file-beneath-file', 'f/g', [file('f'), file('f/g')]),
    bad('local-name-differs', 'innocent.txt', [{ ...file('innocent.txt'), localName: '../../evil.txt' }]),
    // The headers say 100 bytes; the data inflates to 64 MiB.
    bad('bomb-lying-size', 'zeros.bin', [{ name: 'zeros.bin', data: Buffer.alloc(64 * MIB), deflate: true, declaredSize: 100 }]),
    { name: 'bomb-declared', zip: rawZipOf([{ name: 'huge.bin', data: Buffer.alloc(1024), deflate: true, declaredSize: Math.min(maxBytes + 1, 0xfffffffe) }]), code: 'FLINT_ERR_PAYLOAD_TOO_LARGE', entry: 'huge.bin' },
    {
      name: 'bomb-many-entries',
      zip: rawZipOf(Array.from({ length: many }, (_, i) => ({ name: `z${i}.bin`, data: Buffer.alloc(MIB), deflate: true }))),
      code: 'FLINT_ERR_PAYLOAD_TOO_LARGE',
      entry: `z${many - 2}.bin`,
    },
  ];
}
