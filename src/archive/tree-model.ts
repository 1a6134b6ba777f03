// The tree an archive describes, modelled entry by entry as extraction would
// build it. Checking each name and each link target on its own is not enough:
// `a -> .` followed by `a/a/a/x -> ../../..` has two harmless-looking entries
// whose second leaves the tree once the first exists. So the model refuses a
// path that passes through a link or a file made earlier, a name that
// normalises to a path already used (`a.txt` and `./a.txt`), a link or file
// where an earlier entry needed a directory, and, once the whole tree is
// known, a link whose target, resolved through the tree (links included),
// leaves it or never ends. The same resolver walks a real directory (see
// fs-tree.ts), so a tree on disk is held to the same rule.
import { FlintError } from '../api/errors.ts';

export type EntryKind = 'dir' | 'file' | 'link';

const MAX_LINK_TARGET = 4096;
// As Linux's MAXSYMLINKS: more links than this on one path is a loop to the kernel too.
const MAX_HOPS = 40;

const bad = (message: string) => new FlintError('FLINT_ERR_BAD_ARCHIVE', message);

/** The components of an entry's path (empty for the root), or FLINT_ERR_BAD_ARCHIVE naming it. */
export function entryPath(name: string): string[] {
  if (name === '') throw bad('an entry has an empty name');
  if (name.includes('\0')) throw bad(`entry '${name.replace(/\0/g, '\\0')}' has a NUL byte in its name`);
  if (name.includes('\\')) throw bad(`entry '${name}' uses backslashes`);
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) throw bad(`entry '${name}' has an absolute path`);
  const parts = name.split('/');
  if (parts.includes('..')) throw bad(`entry '${name}' leaves the archive's directory ('..')`);
  return parts.filter((p) => p !== '' && p !== '.');
}

/** Why a link target is unusable whatever the tree holds, or undefined. */
function targetSyntaxProblem(name: string, target: string): string | undefined {
  if (target === '' || target.includes('\0')) return `symlink '${name}' has an invalid target`;
  if (target.length > MAX_LINK_TARGET) return `symlink '${name}' has a target longer than ${MAX_LINK_TARGET} bytes`;
  if (target.startsWith('/')) return `symlink '${name}' points to the absolute path '${target}'`;
  return undefined;
}

export type Looked = { kind: 'dir' | 'file' | 'missing' } | { kind: 'link'; target: string };

/** What is at a path of a tree: the model below, or a directory on disk. */
export interface TreeView {
  lookup(parts: readonly string[]): Looked;
}

/**
 * Why the link at `linkParts` with `target` leaves the tree or loops, or
 * undefined when it stays inside. Links met on the way are followed as the
 * kernel would; below a missing name the rest resolves by its letters (the
 * kernel would stop there with ENOENT).
 */
export function linkProblem(view: TreeView, name: string, linkParts: readonly string[], target: string): string | undefined {
  const syntax = targetSyntaxProblem(name, target);
  if (syntax) return syntax;
  const at = linkParts.slice(0, -1);
  const pending = target.split('/');
  let hops = 0;
  while (pending.length > 0) {
    const c = pending.shift() as string;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      if (at.length === 0) return `symlink '${name}' points to '${target}', outside the archive`;
      at.pop();
      continue;
    }
    at.push(c);
    const found = view.lookup(at);
    if (found.kind !== 'link') continue;
    if (++hops > MAX_HOPS) return `symlink '${name}' points to '${target}', a loop of links`;
    at.pop();
    if (found.target.startsWith('/')) return `symlink '${name}' points to '${target}', which leads through '${at.concat(c).join('/')}' to the absolute path '${found.target}'`;
    pending.unshift(...found.target.split('/'));
  }
  return undefined;
}

interface Node {
  kind: EntryKind;
  /** The entry's name as the archive wrote it (for messages). */
  name: string;
  /** Named by an entry, rather than implied by a deeper one. */
  explicit: boolean;
  target?: string;
}

export class ArchiveTree implements TreeView {
  readonly #nodes = new Map<string, Node>();
  readonly #links: { name: string; parts: string[]; target: string }[] = [];

  lookup(parts: readonly string[]): Looked {
    const n = this.#nodes.get(parts.join('/'));
    if (!n) return { kind: 'missing' };
    return n.kind === 'link' ? { kind: 'link', target: n.target as string } : { kind: n.kind };
  }

  /** Adds the next entry; returns its path's components, or throws FLINT_ERR_BAD_ARCHIVE naming it. */
  add(name: string, kind: EntryKind, target?: string): string[] {
    const parts = entryPath(name);
    if (parts.length === 0) {
      if (kind === 'dir') return parts;
      throw bad(`entry '${name}' names the archive's root as a ${kind === 'link' ? 'symlink' : 'file'}`);
    }
    for (let i = 1; i < parts.length; i++) {
      const key = parts.slice(0, i).join('/');
      const above = this.#nodes.get(key);
      if (!above) this.#nodes.set(key, { kind: 'dir', name: `${key}/`, explicit: false });
      else if (above.kind === 'link') throw bad(`entry '${name}' passes through the symlink '${above.name}'`);
      else if (above.kind === 'file') throw bad(`entry '${name}' is beneath the file '${above.name}'`);
    }
    const key = parts.join('/');
    const existing = this.#nodes.get(key);
    if (existing?.explicit) {
      throw bad(existing.name === name ? `entry '${name}' appears twice` : `entry '${name}' is the same path as entry '${existing.name}'`);
    }
    if (existing && kind !== 'dir') {
      throw bad(`entry '${name}' is a ${kind === 'link' ? 'symlink' : 'file'}, but an earlier entry is beneath it`);
    }
    if (kind === 'link') {
      const syntax = targetSyntaxProblem(name, target ?? '');
      if (syntax) throw bad(syntax);
      this.#links.push({ name, parts, target: target as string });
    }
    this.#nodes.set(key, { kind, name, explicit: true, target });
    return parts;
  }

  /** After the last entry: every link, resolved through the whole tree, stays inside it. */
  finish(): void {
    for (const l of this.#links) {
      const problem = linkProblem(this, l.name, l.parts, l.target);
      if (problem) throw bad(problem);
    }
  }
}
