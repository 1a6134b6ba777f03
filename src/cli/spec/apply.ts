// `spec apply`, `spec destroy` and `spec list` against the control plane.
// Every resource applied from a spec directory carries the directory's
// deployment uid as a label, which is how `--delete` and `destroy` find what
// the directory owns, and how apply refuses to take over what another
// directory owns. Archives are built and every owner checked before the
// first write.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FlintError } from '../../api/errors.ts';
import type { AnyResource, Archive, KindName, Package } from '../../api/kinds.ts';
import { zipFiles } from '../../archive/index.ts';
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
};

type Outcome = 'created' | 'updated' | 'deleted';

export class ApplyReport {
  readonly #done = new Map<string, string[]>();
  unchanged = 0;

  add(kind: KindName, outcome: Outcome, name: string): void {
    const key = `${kind} ${outcome}`;
    this.#done.set(key, [...(this.#done.get(key) ?? []), name]);
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

/** Files an archive spec names, relative to the project root, sorted. */
export function archiveFiles(root: string, spec: ArchiveUploadSpec): string[] {
  const found = new Set<string>();
  const addTree = (rel: string) => {
    const full = path.join(root, rel);
    const st = fs.statSync(full);
    if (st.isDirectory()) for (const e of fs.readdirSync(full)) addTree(path.join(rel, e));
    else if (st.isFile()) found.add(rel.split(path.sep).join('/'));
  };
  for (const pattern of spec.include) for (const rel of fs.globSync(pattern, { cwd: root })) addTree(rel);
  const kept = [...found].filter((rel) => !spec.exclude.some((ex) => path.matchesGlob(rel, ex)));
  if (kept.length === 0) throw new FlintError('FLINT_ERR_VALIDATION', `${spec.where}: ArchiveUploadSpec '${spec.name}' matches no files under ${root}`);
  return kept.sort();
}

/**
 * The archives the packages name, from the files their specs include: one
 * plain file is kept as it is (a single-file function), one zip is used as
 * it is, anything else is zipped with paths relative to the project root.
 */
async function buildArchives(c: Ctx, set: SpecSet): Promise<Map<string, Archive>> {
  const root = path.dirname(path.resolve(set.dir));
  const used = new Set<string>();
  for (const { resource } of set.resources) {
    if (resource.kind !== 'Package') continue;
    for (const a of [resource.spec.source, resource.spec.deployment]) {
      if (a?.url?.startsWith(ARCHIVE_SPEC_SCHEME)) used.add(a.url.slice(ARCHIVE_SPEC_SCHEME.length));
    }
  }
  const built = new Map<string, Archive>();
  for (const name of used) {
    const spec = set.archives.get(name) as ArchiveUploadSpec;
    const files = archiveFiles(root, spec);
    if (files.length === 1) {
      built.set(name, await archiveOfFile(c, path.join(root, files[0])));
      continue;
    }
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-spec-'));
    try {
      const zip = path.join(tmp, `${name}.zip`);
      await zipFiles(
        files.map((rel) => ({ path: path.join(root, rel), name: rel })),
        zip,
      );
      built.set(name, await archiveOfFile(c, zip));
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  return built;
}

/** JSON with sorted keys: objects from the server and from a file compare equal when they mean the same. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x,
  );
}

/** What the specs decide about a resource; for a package, not the deployment a build wrote. */
function decided(obj: AnyResource, fromSpec: AnyResource): unknown {
  const meta = { labels: obj.metadata.labels ?? {}, annotations: obj.metadata.annotations ?? {} };
  if (obj.kind === 'Secret' || obj.kind === 'ConfigMap') return { meta, data: obj.data ?? {} };
  if (obj.kind === 'Package') {
    const { deployment, ...rest } = obj.spec;
    return { meta, spec: (fromSpec as Package).spec.deployment ? obj.spec : rest };
  }
  return { meta, spec: obj.spec };
}

function desiredOf(r: AnyResource, uid: string, archives: Map<string, Archive>): AnyResource {
  const obj = structuredClone(r);
  obj.metadata.labels = { ...(obj.metadata.labels ?? {}), [DEPLOYMENT_LABEL]: uid };
  if (obj.kind === 'Package') {
    for (const field of ['source', 'deployment'] as const) {
      const url = obj.spec[field]?.url;
      if (url?.startsWith(ARCHIVE_SPEC_SCHEME)) obj.spec[field] = archives.get(url.slice(ARCHIVE_SPEC_SCHEME.length));
    }
  }
  return obj;
}

const keyOf = (r: AnyResource) => `${r.kind} ${r.metadata.namespace}/${r.metadata.name}`;

export async function applySpecs(c: Ctx, set: SpecSet, opts: { delete?: boolean } = {}): Promise<ApplyReport> {
  const client = c.client();
  const uid = set.deployment.uid;
  const archives = await buildArchives(c, set);
  const plan = [];
  for (const { resource } of set.resources) {
    const desired = desiredOf(resource, uid, archives);
    const current = await client.tryGet(resource.kind, resource.metadata.namespace, resource.metadata.name);
    const owner = current?.metadata.labels?.[DEPLOYMENT_LABEL];
    if (owner !== undefined && owner !== uid) {
      throw new FlintError(
        'FLINT_ERR_CONFLICT',
        `${resource.kind} '${resource.metadata.name}' in namespace '${resource.metadata.namespace}' belongs to another spec directory (deployment uid ${owner}); nothing was applied`,
      );
    }
    plan.push({ desired, current });
  }
  const report = new ApplyReport();
  for (const { desired, current } of plan) {
    const name = desired.metadata.name;
    if (!current) {
      await client.create(desired);
      report.add(desired.kind, 'created', name);
    } else if (canonical(decided(current, desired)) === canonical(decided(desired, desired))) {
      report.unchanged++;
    } else {
      if (desired.kind === 'Package' && !desired.spec.deployment && current.kind === 'Package' && current.spec.deployment) {
        // Keep serving the built code until the new source is built.
        desired.spec.deployment = current.spec.deployment;
      }
      desired.metadata.resourceVersion = current.metadata.resourceVersion;
      await client.update(desired);
      report.add(desired.kind, 'updated', name);
    }
  }
  if (opts.delete) {
    const wanted = new Set(set.resources.map((r) => keyOf(r.resource)));
    await deleteOwned(c, uid, report, (r) => !wanted.has(keyOf(r)));
  }
  return report;
}

/** Deletes what the deployment owns (and `which` selects), triggers first. */
async function deleteOwned(c: Ctx, uid: string, report: ApplyReport, which: (r: AnyResource) => boolean): Promise<void> {
  const client = c.client();
  for (const kind of [...APPLY_ORDER].reverse()) {
    for (const r of await client.list(kind, undefined, `${DEPLOYMENT_LABEL}=${uid}`)) {
      if (!which(r)) continue;
      await client.delete(kind, r.metadata.namespace, r.metadata.name);
      report.add(kind, 'deleted', r.metadata.name);
    }
  }
}

export async function destroySpecs(c: Ctx, set: SpecSet): Promise<ApplyReport> {
  const report = new ApplyReport();
  await deleteOwned(c, set.deployment.uid, report, () => true);
  return report;
}

export async function ownedResources(c: Ctx, set: SpecSet): Promise<AnyResource[]> {
  const client = c.client();
  const out: AnyResource[] = [];
  for (const kind of APPLY_ORDER) out.push(...(await client.list(kind, undefined, `${DEPLOYMENT_LABEL}=${set.deployment.uid}`)));
  return out;
}
