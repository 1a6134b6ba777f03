// `spec apply`, `spec destroy` and `spec list` against the control plane.
// Every resource applied from a spec directory carries the directory's
// deployment uid as a label, which is how `--delete` and `destroy` find what
// the directory owns, and how apply refuses to take over what another
// directory owns. Every document is checked, every owner read and every
// archive built before the first create or update.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FlintError, isFlintError } from '../../api/errors.ts';
import { functionUses, routesCollide } from '../../api/conflicts.ts';
import type { AnyResource, Archive, FunctionResource, HTTPTrigger, KindName, Package } from '../../api/kinds.ts';
import { DEFAULT_EXTRACT_LIMITS, inspectZip, isZipFile, zipFiles } from '../../archive/index.ts';
import { archiveOfFile } from '../archive-input.ts';
import type { Ctx } from '../io.ts';
import { APPLY_ORDER, ARCHIVE_SPEC_SCHEME, type ArchiveUploadSpec, DEPLOYMENT_LABEL, type SpecSet } from './documents.ts';

const WORDS: Record<KindName, [string, string]> = {
  Environment: ['environment', 'environments'],
  Package: ['package', 'packages'],
  Function: ['function', 'functions'],
  HTTPTrigger: ['httptrigger', 'httptriggers'],
  MessageQueueTrigger: ['mqtrigger', 'mqtriggers'],
  Secret: ['secret', 'secrets'],
  ConfigMap: ['configmap', 'configmaps'],
  TimeTrigger: ['timetrigger', 'timetriggers'],
  CanaryConfig: ['canaryconfig', 'canaryconfigs'],
};

type Outcome = 'created' | 'updated' | 'deleted';

export class ApplyReport {
  readonly #done = new Map<string, string[]>();
  /** For each update, the fields it changes (`spec.functionTimeout`), in apply order. */
  readonly #changes: string[] = [];
  unchanged = 0;

  add(kind: KindName, outcome: Outcome, name: string, changed?: string[]): void {
    const key = `${kind} ${outcome}`;
    this.#done.set(key, [...(this.#done.get(key) ?? []), name]);
    if (changed !== undefined) this.#changes.push(`  ${WORDS[kind][0]} ${name}: ${changed.join(', ')}`);
  }

  /** What each update changes: the field paths, never their values (a Secret's are secret). */
  changes(): string[] {
    return [...this.#changes];
  }

  /** Fission's summary lines: `2 functions created: a, b`. */
  lines(): string[] {
    const out: string[] = [];
    for (const outcome of ['created', 'updated', 'deleted'] as const) {
      for (const kind of APPLY_ORDER) {
        const names = this.#done.get(`${kind} ${outcome}`);
        if (names) out.push(`${names.length} ${WORDS[kind][names.length === 1 ? 0 : 1]} ${outcome}: ${names.join(', ')}`);
      }
    }
    return out;
  }
}

function inside(root: string, full: string): boolean {
  const rel = path.relative(root, full);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** Excluded when the file or any directory above it matches an exclude glob. */
function excluded(rel: string, exclude: string[]): boolean {
  const parts = rel.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const prefix = parts.slice(0, i).join('/');
    if (exclude.some((ex) => path.matchesGlob(prefix, ex))) return true;
  }
  return false;
}

/**
 * Files an archive spec names, relative to the project root, sorted. Nothing
 * outside the project gets in: every match is resolved (globs such as
 * `{..,src}` included), a symlink counts as the file it points to only when
 * that file is inside the project, and symlinked directories are not followed.
 */
export function archiveFiles(root: string, spec: ArchiveUploadSpec): string[] {
  const realRoot = fs.realpathSync(root);
  const found = new Set<string>();
  const refuse = (rel: string, why: string) => new FlintError('FLINT_ERR_VALIDATION', `${spec.where}: ArchiveUploadSpec '${spec.name}': '${rel}' ${why}`);
  const addTree = (rel: string) => {
    const full = path.join(root, rel);
    const st = fs.lstatSync(full);
    if (st.isSymbolicLink()) {
      const target = fs.realpathSync(full);
      if (!inside(realRoot, target)) throw refuse(rel, 'is a symlink that leaves the project directory');
      if (!fs.statSync(target).isFile()) throw refuse(rel, 'is a symlink to a directory, which is not followed');
    } else if (st.isDirectory()) {
      for (const e of fs.readdirSync(full)) addTree(path.join(rel, e));
      return;
    } else if (!st.isFile()) return;
    if (!inside(realRoot, fs.realpathSync(path.dirname(full)))) throw refuse(rel, 'leaves the project directory');
    found.add(rel.split(path.sep).join('/'));
  };
  for (const pattern of spec.include) {
    for (const rel of fs.globSync(pattern, { cwd: root })) {
      let real: string;
      try {
        real = fs.realpathSync(path.join(root, rel));
      } catch {
        throw refuse(rel, 'is a broken symlink');
      }
      if (!inside(realRoot, real)) throw refuse(rel, 'leaves the project directory');
      addTree(rel);
    }
  }
  const kept = [...found].filter((rel) => !excluded(rel, spec.exclude));
  if (kept.length === 0) throw new FlintError('FLINT_ERR_VALIDATION', `${spec.where}: ArchiveUploadSpec '${spec.name}' matches no files under ${root}`);
  return kept.sort();
}

/** Where an archive spec is used: a build's source is always a zip; a deployment of one plain file stays that file. */
type ArchiveUse = 'source' | 'deployment';

function archiveUses(set: SpecSet): Map<string, Set<ArchiveUse>> {
  const uses = new Map<string, Set<ArchiveUse>>();
  for (const { resource } of set.resources) {
    if (resource.kind !== 'Package') continue;
    for (const field of ['source', 'deployment'] as const) {
      const url = resource.spec[field]?.url;
      if (!url?.startsWith(ARCHIVE_SPEC_SCHEME)) continue;
      const name = url.slice(ARCHIVE_SPEC_SCHEME.length);
      uses.set(name, (uses.get(name) ?? new Set()).add(field));
    }
  }
  return uses;
}

/** Checks that every archive a package names has files, without reading them (for `spec validate`). */
export function checkArchiveFiles(set: SpecSet): void {
  const root = path.dirname(path.resolve(set.dir));
  for (const name of archiveUses(set).keys()) archiveFiles(root, set.archives.get(name) as ArchiveUploadSpec);
}

/**
 * The archives the packages name, from the files their specs include: one
 * zip is used as it is, one plain file used as a deployment stays that file
 * (a single-file function), anything else is zipped with paths relative to
 * the project root. Keyed `<use> <name>`.
 */
export async function buildArchives(c: Ctx, set: SpecSet, dryRun = false): Promise<Map<string, Archive>> {
  const root = path.dirname(path.resolve(set.dir));
  const built = new Map<string, Archive>();
  for (const [name, uses] of archiveUses(set)) {
    const files = archiveFiles(root, set.archives.get(name) as ArchiveUploadSpec);
    const single = files.length === 1 ? path.join(root, files[0]) : undefined;
    const zip = single !== undefined && (await isZipFile(single));
    // A zip taken as it is is checked here as the server would (no paths or
    // links leaving it, size caps), so a bad one stops the apply before any write.
    if (zip) await inspectZip(single, DEFAULT_EXTRACT_LIMITS);
    const asIs = zip ? await archiveOfFile(c, single, undefined, undefined, dryRun) : undefined;
    for (const use of uses) {
      if (asIs) built.set(`${use} ${name}`, asIs);
      else if (single !== undefined && use === 'deployment') built.set(`${use} ${name}`, await archiveOfFile(c, single, undefined, undefined, dryRun));
      else built.set(`${use} ${name}`, await zipped(c, root, set.archives.get(name) as ArchiveUploadSpec, files, dryRun));
    }
  }
  return built;
}

async function zipped(c: Ctx, root: string, spec: ArchiveUploadSpec, files: string[], dryRun: boolean): Promise<Archive> {
  const base = (spec.rootdir ?? '').replace(/\/+$/, '');
  const entries = files.map((rel) => {
    const name = base === '' ? rel : path.posix.relative(base, rel);
    if (name.startsWith('../')) throw new FlintError('FLINT_ERR_VALIDATION', `${spec.where}: ArchiveUploadSpec '${spec.name}': '${rel}' is outside its rootdir '${spec.rootdir}'`);
    return { path: path.join(root, rel), name };
  });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-spec-'));
  try {
    const zip = path.join(tmp, `${spec.name}.zip`);
    await zipFiles(entries, zip);
    return await archiveOfFile(c, zip, undefined, undefined, dryRun);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** JSON with sorted keys: objects from the server and from a file compare equal when they mean the same. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x,
  );
}

/** Dotted paths where two decided forms differ; objects are walked, anything else compared whole. */
function changedPaths(a: unknown, b: unknown, at: string): string[] {
  const isObj = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x);
  if (!isObj(a) || !isObj(b)) return canonical(a) === canonical(b) ? [] : [at];
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return keys.flatMap((k) => changedPaths(a[k], b[k], at === '' ? k : `${at}.${k}`));
}

/** What the specs decide about a resource; for a package, not the deployment a build wrote. */
function decided(obj: AnyResource, fromSpec: AnyResource): unknown {
  const metadata = { labels: obj.metadata.labels ?? {}, annotations: obj.metadata.annotations ?? {} };
  if (obj.kind === 'Secret' || obj.kind === 'ConfigMap') return { metadata, data: obj.data ?? {} };
  if (obj.kind === 'Package') {
    const { deployment, ...rest } = obj.spec;
    return { metadata, spec: (fromSpec as Package).spec.deployment ? obj.spec : rest };
  }
  return { metadata, spec: obj.spec };
}

function desiredOf(r: AnyResource, uid: string, archives: Map<string, Archive>): AnyResource {
  const obj = structuredClone(r);
  obj.metadata.labels = { ...(obj.metadata.labels ?? {}), [DEPLOYMENT_LABEL]: uid };
  if (obj.kind === 'Package') {
    for (const field of ['source', 'deployment'] as const) {
      const url = obj.spec[field]?.url;
      if (url?.startsWith(ARCHIVE_SPEC_SCHEME)) obj.spec[field] = archives.get(`${field} ${url.slice(ARCHIVE_SPEC_SCHEME.length)}`);
    }
  }
  return obj;
}

const keyOf = (r: AnyResource) => `${r.kind} ${r.metadata.namespace}/${r.metadata.name}`;

/** With `dryRun`, everything is read and checked and the report says what would change; nothing is uploaded or written. */
export async function applySpecs(c: Ctx, set: SpecSet, opts: { delete?: boolean; dryRun?: boolean } = {}): Promise<ApplyReport> {
  const dryRun = opts.dryRun === true;
  const client = c.client();
  const uid = set.deployment.uid;
  // Read and check everything first: uploads, creates and updates come after.
  const found = [];
  for (const { resource } of set.resources) {
    const current = await client.tryGet(resource.kind, resource.metadata.namespace, resource.metadata.name);
    const owner = current?.metadata.labels?.[DEPLOYMENT_LABEL];
    if (owner !== undefined && owner !== uid) {
      throw new FlintError(
        'FLINT_ERR_CONFLICT',
        `${resource.kind} '${resource.metadata.name}' in namespace '${resource.metadata.namespace}' belongs to another spec directory (deployment uid ${owner}); nothing was applied`,
      );
    }
    found.push({ resource, current });
  }
  const wanted = new Set(set.resources.map((r) => keyOf(r.resource)));
  const doomed = opts.delete ? (await ownedResources(c, set)).filter((r) => !wanted.has(keyOf(r))) : [];
  await checkAhead(c, set, doomed);
  const archives = await buildArchives(c, set, dryRun);
  const plan = found.map(({ resource, current }) => ({ desired: desiredOf(resource, uid, archives), current }));
  const report = new ApplyReport();
  for (const { desired, current } of plan) {
    const name = desired.metadata.name;
    if (!current) {
      if (!dryRun) await client.create(desired);
      report.add(desired.kind, 'created', name);
    } else if (canonical(decided(current, desired)) === canonical(decided(desired, desired))) {
      report.unchanged++;
    } else if (dryRun) {
      report.add(desired.kind, 'updated', name, changedPaths(decided(current, desired), decided(desired, desired), ''));
    } else {
      if (desired.kind === 'Package' && !desired.spec.deployment && current.kind === 'Package' && current.spec.deployment) {
        // Keep serving the built code until the new source is built.
        desired.spec.deployment = current.spec.deployment;
      }
      desired.metadata.resourceVersion = current.metadata.resourceVersion;
      await updateOverStatus(c, desired, current);
      report.add(desired.kind, 'updated', name);
    }
  }
  if (dryRun) for (const r of [...doomed].reverse()) report.add(r.kind, 'deleted', r.metadata.name);
  else await deleteAll(c, doomed, report);
  return report;
}

/**
 * An update that a write of the object's status alone (a build, a time
 * trigger's run) made stale is tried again on the new version; a change of
 * what the specs decide stays a conflict.
 */
async function updateOverStatus(c: Ctx, desired: AnyResource, read: AnyResource): Promise<void> {
  const client = c.client();
  for (let attempt = 1; ; attempt++) {
    try {
      await client.update(desired);
      return;
    } catch (err) {
      if (!isFlintError(err) || err.code !== 'FLINT_ERR_CONFLICT' || attempt >= 5) throw err;
      const now = await client.tryGet(desired.kind, desired.metadata.namespace, desired.metadata.name);
      if (!now || canonical(decided(now, desired)) !== canonical(decided(read, desired))) throw err;
      desired.metadata.resourceVersion = now.metadata.resourceVersion;
    }
  }
}

/**
 * What the control plane would refuse half-way through, checked before the
 * first write: a route that collides with another (on the server or in the
 * specs), and, with --delete, an environment or package to delete that a
 * function outside the specs still uses.
 */
async function checkAhead(c: Ctx, set: SpecSet, doomed: AnyResource[]): Promise<void> {
  const client = c.client();
  const declared = set.resources.map((r) => r.resource);
  const routes = declared.filter((r): r is HTTPTrigger => r.kind === 'HTTPTrigger');
  if (routes.length > 0) {
    const mine = new Set(routes.map(keyOf));
    const others = [...(await client.list('HTTPTrigger', undefined)).filter((t) => !mine.has(keyOf(t))), ...routes];
    for (const r of routes) {
      const hit = others.find((o) => keyOf(o) !== keyOf(r) && routesCollide(r.spec, o.spec));
      if (hit) {
        throw new FlintError(
          'FLINT_ERR_ALREADY_EXISTS',
          `HTTPTrigger '${r.metadata.name}' has the same host, URL and method as HTTPTrigger '${hit.metadata.namespace}/${hit.metadata.name}'; nothing was applied`,
        );
      }
    }
  }
  const gone = doomed.filter((r) => r.kind === 'Environment' || r.kind === 'Package');
  if (gone.length > 0) {
    const byKey = new Map<string, FunctionResource>();
    for (const f of await client.list('Function', undefined)) byKey.set(keyOf(f), f);
    for (const f of declared) if (f.kind === 'Function') byKey.set(keyOf(f), f);
    for (const d of doomed) if (d.kind === 'Function') byKey.delete(keyOf(d));
    for (const r of gone) {
      const users = [...byKey.values()].filter((f) => functionUses(f, r.kind as 'Environment' | 'Package', r.metadata.namespace, r.metadata.name));
      if (users.length > 0) {
        throw new FlintError(
          'FLINT_ERR_IN_USE',
          `--delete would remove ${r.kind} '${r.metadata.name}', which function ${users.map((f) => `'${f.metadata.name}'`).join(', ')} still uses; nothing was applied`,
        );
      }
    }
  }
}

/** Deletes resources listed in apply order (as ownedResources lists them), triggers first. */
async function deleteAll(c: Ctx, resources: AnyResource[], report: ApplyReport): Promise<void> {
  const client = c.client();
  for (const r of [...resources].reverse()) {
    await client.delete(r.kind, r.metadata.namespace, r.metadata.name);
    report.add(r.kind, 'deleted', r.metadata.name);
  }
}

export async function destroySpecs(c: Ctx, set: SpecSet): Promise<ApplyReport> {
  const report = new ApplyReport();
  await deleteAll(c, await ownedResources(c, set), report);
  return report;
}

export async function ownedResources(c: Ctx, set: SpecSet): Promise<AnyResource[]> {
  const client = c.client();
  const out: AnyResource[] = [];
  for (const kind of APPLY_ORDER) out.push(...(await client.list(kind, undefined, `${DEPLOYMENT_LABEL}=${set.deployment.uid}`)));
  return out;
}
