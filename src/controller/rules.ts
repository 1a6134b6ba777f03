// Rules between resources that no single schema can check: what may be
// deleted while still in use, what is refused as a duplicate, and what is
// accepted with a warning because it may be created later.
import { FlintError } from '../api/errors.ts';
import { functionUses, routesCollide } from '../api/conflicts.ts';
import type { AnyResource, FunctionReference, KindName } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';

function refNames(ref: FunctionReference): string[] {
  return (ref.type ?? 'name') === 'name' ? [ref.name as string] : Object.keys(ref.functionweights ?? {});
}

/** Refuses deleting an environment or package that a function uses, unless forced. */
export async function checkDeletable(store: Store, kind: KindName, namespace: string, name: string): Promise<void> {
  if (kind !== 'Environment' && kind !== 'Package') return;
  const { items } = await store.list('Function');
  const users = items.filter((fn) => functionUses(fn, kind, namespace, name));
  if (users.length === 0) return;
  const list = users.map((f) => f.metadata.name).join(', ');
  const what = kind === 'Environment' ? 'environment' : 'package';
  throw new FlintError('FLINT_ERR_IN_USE', `${what} '${name}' is used by at least one function (${list}); use --force to delete it anyway`);
}

/** Warnings for a write that is accepted; throws for one that is not. */
export async function checkReferences(store: Store, obj: AnyResource): Promise<string[]> {
  const warnings: string[] = [];
  const ns = obj.metadata.namespace;
  const fnMissing = async (names: string[]) => {
    for (const n of names) {
      if (!(await store.get('Function', ns, n))) warnings.push(`function '${n}' does not exist yet in namespace '${ns}'; the trigger does nothing until it is created`);
    }
  };
  switch (obj.kind) {
    case 'Function': {
      const envNs = obj.spec.environment.namespace ?? ns;
      if (!(await store.get('Environment', envNs, obj.spec.environment.name))) {
        warnings.push(`environment '${obj.spec.environment.name}' does not exist yet in namespace '${envNs}'`);
      }
      const pkgRef = obj.spec.package.packageref;
      if (!(await store.get('Package', pkgRef.namespace ?? ns, pkgRef.name))) {
        warnings.push(`package '${pkgRef.name}' does not exist yet in namespace '${pkgRef.namespace ?? ns}'`);
      }
      for (const s of obj.spec.secrets ?? []) {
        if (!(await store.get('Secret', s.namespace ?? ns, s.name))) warnings.push(`secret '${s.name}' does not exist yet`);
      }
      for (const c of obj.spec.configmaps ?? []) {
        if (!(await store.get('ConfigMap', c.namespace ?? ns, c.name))) warnings.push(`configmap '${c.name}' does not exist yet`);
      }
      break;
    }
    case 'Package': {
      const envNs = obj.spec.environment.namespace ?? ns;
      if (!(await store.get('Environment', envNs, obj.spec.environment.name))) {
        warnings.push(`environment '${obj.spec.environment.name}' does not exist yet in namespace '${envNs}'`);
      }
      break;
    }
    case 'HTTPTrigger': {
      await fnMissing(refNames(obj.spec.functionref));
      // Two triggers with the same host, path and an overlapping method set
      // would shadow each other; refuse the second, across all namespaces.
      const { items } = await store.list('HTTPTrigger');
      for (const other of items) {
        if (other.metadata.namespace === ns && other.metadata.name === obj.metadata.name) continue;
        if (routesCollide(obj.spec, other.spec)) {
          throw new FlintError(
            'FLINT_ERR_ALREADY_EXISTS',
            `HTTPTrigger with same host, URL and method already exists (${other.metadata.namespace}/${other.metadata.name})`,
            { field: obj.spec.prefix ? 'spec.prefix' : 'spec.relativeurl' },
          );
        }
      }
      break;
    }
    case 'MessageQueueTrigger':
    case 'TimeTrigger':
      await fnMissing(refNames(obj.spec.functionref));
      break;
  }
  return warnings;
}
