// Reading a spec directory: every .yaml, .yml and .json file in it, each
// possibly holding several YAML documents, sorted into resources (Flint's
// `flint.dev/v1` or Fission's `fission.io/v1`, converted), archive upload
// specs and the deployment config. Everything is checked here, before
// `spec apply` writes anything: a bad document is reported with its file and
// position, all problems at once.
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { FlintError } from '../../api/errors.ts';
import { type AnyResource, isKindName, KIND_NAMES, type KindName, type Package } from '../../api/kinds.ts';
import { API_VERSION, FISSION_API_VERSION } from '../../api/names.ts';
import { type ValidateOptions, validateResource } from '../../api/validate.ts';
import { fromFission } from './fission.ts';
import { ARCHIVE_SPEC_SCHEME } from './names.ts';

export { ARCHIVE_SPEC_SCHEME, DEPLOYMENT_CONFIG_FILE, DEPLOYMENT_LABEL } from './names.ts';

export interface DeploymentConfig {
  name: string;
  uid: string;
}

export interface ArchiveUploadSpec {
  name: string;
  /** Globs relative to the project root (the spec directory's parent). */
  include: string[];
  exclude: string[];
  /** Paths in the zip are relative to this directory of the project (default: the project root). */
  rootdir?: string;
  where: string;
}

export interface SpecResource {
  resource: AnyResource;
  where: string;
}

export interface SpecSet {
  dir: string;
  deployment: DeploymentConfig;
  /** In the order they are applied: what others refer to comes first. */
  resources: SpecResource[];
  archives: Map<string, ArchiveUploadSpec>;
  warnings: string[];
}

/** Environments before the packages that use them, and so on to the triggers, and the canaries after the routes they move. */
export const APPLY_ORDER: readonly KindName[] = ['Environment', 'Secret', 'ConfigMap', 'Package', 'Function', 'HTTPTrigger', 'MessageQueueTrigger', 'TimeTrigger', 'CanaryConfig'];

const SPEC_EXTENSIONS = new Set(['.yaml', '.yml', '.json']);
const UID_PATTERN = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function specFiles(dir: string): string[] {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    throw new FlintError('FLINT_ERR_VALIDATION', `cannot read the spec directory '${dir}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message} (run 'flint spec init' first)`);
  }
  return entries
    .filter((e) => e.isFile() && SPEC_EXTENSIONS.has(path.extname(e.name).toLowerCase()))
    .map((e) => path.join(dir, e.name))
    .sort();
}

function stringList(v: unknown): string[] | undefined {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && x !== '')) return undefined;
  return v as string[];
}

function archiveSpec(doc: Record<string, unknown>, where: string, problems: string[]): ArchiveUploadSpec | undefined {
  const name = doc.name;
  const include = stringList(doc.include);
  const exclude = stringList(doc.exclude);
  if (typeof name !== 'string' || !UID_PATTERN.test(name)) problems.push(`${where}: ArchiveUploadSpec needs a name of lowercase letters, digits and '-'`);
  else if (!include || include.length === 0) problems.push(`${where}: ArchiveUploadSpec '${name}' needs include: a list of file globs`);
  else if (!exclude) problems.push(`${where}: ArchiveUploadSpec '${name}': exclude must be a list of file globs`);
  else {
    const rootdir = doc.rootdir;
    if (rootdir !== undefined && rootdir !== null && typeof rootdir !== 'string') {
      problems.push(`${where}: ArchiveUploadSpec '${name}': rootdir must be a directory of the project`);
      return undefined;
    }
    for (const g of [...include, ...exclude, ...(rootdir ? [rootdir] : [])]) {
      if (path.isAbsolute(g) || g.split(/[\\/]/).includes('..')) {
        problems.push(`${where}: ArchiveUploadSpec '${name}': '${g}' leaves the project directory`);
        return undefined;
      }
    }
    return { name, include, exclude, ...(rootdir ? { rootdir } : {}), where };
  }
  return undefined;
}

/** Stands in for an archive:// URL while the package is validated (any stored-archive URL passes). */
const PLACEHOLDER_URL = `/v1/archives/${'0'.repeat(64)}`;

/** Replaces `archive://` URLs, which only the CLI understands, and says where they were. */
function setAsideArchiveSpecs(pkg: Record<string, unknown>): { field: 'source' | 'deployment'; url: string }[] {
  const spec = pkg.spec as Record<string, { url?: unknown } | undefined> | undefined;
  const named: { field: 'source' | 'deployment'; url: string }[] = [];
  for (const field of ['source', 'deployment'] as const) {
    const a = spec?.[field];
    if (a && typeof a.url === 'string' && a.url.startsWith(ARCHIVE_SPEC_SCHEME)) {
      named.push({ field, url: a.url });
      a.url = PLACEHOLDER_URL;
    }
  }
  return named;
}

/** Reads and checks a spec directory; throws one error listing every problem. */
export function readSpecs(dir: string, validation: ValidateOptions = {}): SpecSet {
  const problems: string[] = [];
  const warnings: string[] = [];
  let deployment: DeploymentConfig | undefined;
  const byKind = new Map<KindName, SpecResource[]>(KIND_NAMES.map((k) => [k, []]));
  const seen = new Map<string, string>();
  const archives = new Map<string, ArchiveUploadSpec>();
  for (const file of specFiles(dir)) {
    const rel = path.relative(path.dirname(dir), file);
    const docs = parseAllDocuments(fs.readFileSync(file, 'utf8'));
    const list = Array.isArray(docs) ? docs : [docs];
    list.forEach((d, i) => {
      const where = list.length > 1 ? `${rel} (document ${i + 1})` : rel;
      if (d.errors.length > 0) {
        problems.push(`${where}: not valid YAML: ${d.errors[0].message.split('\n')[0]}`);
        return;
      }
      const doc = d.toJS() as unknown;
      if (doc === null || doc === undefined) return;
      if (typeof doc !== 'object' || Array.isArray(doc)) {
        problems.push(`${where}: expected an object with a kind`);
        return;
      }
      const o = doc as Record<string, unknown>;
      if (o.apiVersion !== undefined && o.apiVersion !== API_VERSION && o.apiVersion !== FISSION_API_VERSION) {
        problems.push(`${where}: apiVersion must be '${API_VERSION}' or '${FISSION_API_VERSION}', got ${JSON.stringify(o.apiVersion)}`);
        return;
      }
      if (o.kind === 'DeploymentConfig') {
        if (deployment) problems.push(`${where}: a second DeploymentConfig (one per spec directory)`);
        else if (typeof o.name !== 'string' || typeof o.uid !== 'string' || !UID_PATTERN.test(o.uid)) {
          problems.push(`${where}: DeploymentConfig needs a name and a uid of lowercase letters, digits and '-'`);
        } else deployment = { name: o.name, uid: o.uid };
        return;
      }
      if (o.kind === 'ArchiveUploadSpec') {
        const a = archiveSpec(o, where, problems);
        if (a && archives.has(a.name)) problems.push(`${where}: ArchiveUploadSpec '${a.name}' is also defined in ${archives.get(a.name)?.where}`);
        else if (a) archives.set(a.name, a);
        return;
      }
      if (o.kind === 'KubernetesWatchTrigger') {
        // Fission's kubewatcher calls a function on changes to Kubernetes objects; Flint does not build it.
        problems.push(`${where}: KubernetesWatchTrigger: Flint has no kubewatch triggers (Fission's kubewatcher); remove the document, or call the function from a watcher of your own`);
        return;
      }
      if (!isKindName(o.kind)) {
        problems.push(`${where}: unknown kind ${JSON.stringify(o.kind)}: expected one of ${[...KIND_NAMES, 'ArchiveUploadSpec', 'DeploymentConfig'].join(', ')}`);
        return;
      }
      const input = o.apiVersion === FISSION_API_VERSION ? fromFission(o) : structuredClone(o);
      const named = o.kind === 'Package' ? setAsideArchiveSpecs(input) : [];
      let resource: AnyResource;
      try {
        resource = validateResource(o.kind, input, validation);
      } catch (err) {
        const name = (o.metadata as { name?: unknown } | undefined)?.name;
        problems.push(`${where}: ${o.kind}${typeof name === 'string' ? ` '${name}'` : ''}: ${(err as Error).message}`);
        return;
      }
      for (const { field, url } of named) ((resource as Package).spec as Record<string, unknown>)[field] = { type: 'url', url };
      const key = `${resource.kind} ${resource.metadata.namespace}/${resource.metadata.name}`;
      const before = seen.get(key);
      if (before) {
        problems.push(`${where}: ${resource.kind} '${resource.metadata.name}' is also defined in ${before}`);
        return;
      }
      seen.set(key, where);
      byKind.get(o.kind)?.push({ resource, where });
    });
  }
  if (!deployment) problems.push(`${path.relative(path.dirname(dir), dir) || dir}: no DeploymentConfig (run 'flint spec init')`);
  const resources = APPLY_ORDER.flatMap((k) => byKind.get(k) ?? []);
  checkReferences(resources, archives, seen, problems, warnings);
  if (problems.length > 0) {
    throw new FlintError('FLINT_ERR_VALIDATION', `${problems.length === 1 ? 'a problem' : `${problems.length} problems`} in the specs:\n  ${problems.join('\n  ')}`);
  }
  return { dir, deployment: deployment as DeploymentConfig, resources, archives, warnings };
}

/** archive:// names must exist; references to resources outside the specs are only warned about (they may exist on the server). */
function checkReferences(resources: SpecResource[], archives: Map<string, ArchiveUploadSpec>, seen: Map<string, string>, problems: string[], warnings: string[]): void {
  const has = (kind: KindName, ns: string, name: string) => seen.has(`${kind} ${ns}/${name}`);
  for (const { resource: r, where } of resources) {
    const ns = r.metadata.namespace;
    if (r.kind === 'Package') {
      for (const field of ['source', 'deployment'] as const) {
        const url = r.spec[field]?.url;
        if (url?.startsWith(ARCHIVE_SPEC_SCHEME) && !archives.has(url.slice(ARCHIVE_SPEC_SCHEME.length))) {
          problems.push(`${where}: Package '${r.metadata.name}': spec.${field}.url: no ArchiveUploadSpec named '${url.slice(ARCHIVE_SPEC_SCHEME.length)}'`);
        }
      }
      const env = r.spec.environment;
      if (!has('Environment', env.namespace ?? ns, env.name)) warnings.push(`${where}: environment '${env.name}' is not in the specs; it must exist on the server`);
    }
    if (r.kind === 'Function') {
      const ref = r.spec.package.packageref;
      if (!has('Package', ref.namespace ?? ns, ref.name)) warnings.push(`${where}: package '${ref.name}' is not in the specs; it must exist on the server`);
    }
  }
}
