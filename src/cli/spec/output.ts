// `--spec` and `--dry` on the create commands: the resources a command would
// create are written to the spec directory (or printed) instead, as Fission's
// CLI does, so `flint spec apply` creates them later. Nothing is asked of the
// control plane. Local files become ArchiveUploadSpecs, paths relative to the
// project directory (the spec directory's parent).
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { AnyResource, Archive } from '../../api/kinds.ts';
import { API_VERSION } from '../../api/names.ts';
import { usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { ARCHIVE_SPEC_SCHEME, DEPLOYMENT_CONFIG_FILE } from './names.ts';

/** A resource as a create command builds it: the server sets the rest of the metadata. */
type NewResource = AnyResource extends infer R ? (R extends AnyResource ? Omit<R, 'metadata' | 'apiVersion'> & { metadata: { name: string; namespace: string; labels?: Record<string, string> } } : never) : never;

export interface SpecOutputFlags {
  spec?: boolean;
  dry?: boolean;
  specdir?: string;
}

export function withSpecOutput(cmd: Command): Command {
  return cmd
    .option('--spec', 'write the resources to the spec directory instead of creating them (see flint spec)')
    .option('--dry', 'print the resources as spec YAML instead of creating them')
    .option('--specdir <dir>', 'the spec directory for --spec', 'specs');
}

const isUrl = (s: string) => /^https?:\/\//i.test(s);

export class SpecOutput {
  readonly #c: Ctx;
  readonly #dry: boolean;
  readonly #dir: string;
  readonly #docs: object[] = [];

  private constructor(c: Ctx, dry: boolean, dir: string) {
    this.#c = c;
    this.#dry = dry;
    this.#dir = dir;
  }

  /** The spec output the flags ask for, or undefined to create on the server as usual. */
  static from(c: Ctx, f: SpecOutputFlags): SpecOutput | undefined {
    if (!f.spec && !f.dry) return undefined;
    const dir = path.resolve(c.io.cwd, f.specdir ?? 'specs');
    if (f.spec && !fs.existsSync(path.join(dir, DEPLOYMENT_CONFIG_FILE))) {
      throw usage(`--spec: ${path.relative(c.io.cwd, dir) || dir} is not a spec directory (run 'flint spec init' first)`);
    }
    return new SpecOutput(c, f.dry === true, dir);
  }

  /** A resource, as `spec apply` reads it. */
  add(obj: { kind: string; metadata: object } & Record<string, unknown>): void {
    this.#docs.push({ apiVersion: API_VERSION, ...obj });
  }

  /**
   * An archive for a package from the command's file arguments: URLs stay
   * URLs; local files and directories become an ArchiveUploadSpec named
   * `name`, zipped as the command itself would (a directory's contents at the
   * root of the zip, loose files side by side, one file or one zip as it is).
   */
  archive(flag: string, inputs: string[], name: string, checksum?: string): Archive {
    if (inputs.some(isUrl)) {
      if (inputs.length > 1) throw usage(`${flag}: give one URL, or local files, not both`);
      return checksum ? { type: 'url', url: inputs[0], checksum: { type: 'sha256', sum: checksum } } : { type: 'url', url: inputs[0] };
    }
    if (checksum) throw usage(`${flag}: with --spec or --dry a checksum applies to a URL; spec apply computes local archives' checksums`);
    const root = path.dirname(this.#dir);
    const rels = inputs.map((given) => {
      const full = path.resolve(this.#c.io.cwd, given);
      if (!fs.existsSync(full)) throw usage(`${flag}: cannot read '${given}': ENOENT`);
      const rel = path.relative(root, full);
      if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) throw usage(`${flag}: '${given}' is not inside the project directory ${root}, where spec archives live`);
      return { rel: rel.split(path.sep).join('/'), dir: fs.statSync(full).isDirectory() };
    });
    if (rels.some((r) => r.dir) && rels.length > 1) throw usage(`${flag}: give one directory, or files, not both`);
    const dirs = new Set(rels.map((r) => (r.dir ? r.rel : path.posix.dirname(r.rel))));
    const rootdir = dirs.size === 1 ? [...dirs][0] : undefined;
    this.#docs.push({
      kind: 'ArchiveUploadSpec',
      name,
      include: rels.map((r) => r.rel),
      ...(rootdir && rootdir !== '.' ? { rootdir } : {}),
    });
    return { type: 'url', url: `${ARCHIVE_SPEC_SCHEME}${name}` };
  }

  /** Writes `<specdir>/<file>.yaml` (refusing to overwrite one) or prints the YAML. */
  async save(file: string): Promise<void> {
    const { stringify } = await import('yaml');
    const text = this.#docs.map((d) => stringify(d)).join('---\n');
    if (this.#dry) {
      this.#c.io.out(text);
      return;
    }
    const target = path.join(this.#dir, `${file}.yaml`);
    if (fs.existsSync(target)) throw usage(`${path.relative(this.#c.io.cwd, target)} already exists: edit it, or remove it first`);
    fs.writeFileSync(target, text);
    this.#c.io.out(`Saved to ${path.relative(this.#c.io.cwd, target)}\n`);
  }
}

/**
 * The end of a create command: with --spec or --dry the resource is saved
 * (to `<kind>-<name>.yaml`) instead of created; otherwise it is created and
 * `created` is printed.
 */
export async function createOrSave(c: Ctx, out: SpecOutput | undefined, obj: NewResource, file: string, created: string): Promise<void> {
  if (out) {
    out.add(obj);
    await out.save(file);
    return;
  }
  await c.client().create(obj);
  c.io.out(created);
}
