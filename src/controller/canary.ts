// A CanaryConfig as the control plane takes it. Refused unless both functions
// exist and its route weighs both of them (Fission's CLI checks the same
// before it creates one), and while another canary is rolling out on the same
// route (two would fight over its weights). Its status belongs to the canary
// controller (src/canary) alone, which starts the rollout again for a changed
// spec (a new generation), as Fission's `canary update` does: a create or
// replace never writes it, so it never races the controller's own write.
import { isRollingOut } from '../api/canary.ts';
import { FlintError, invalid } from '../api/errors.ts';
import type { CanaryConfig } from '../api/kinds.ts';
import type { Store } from '../store/store.ts';

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/** Throws for a canary that cannot run; `current` is the stored one on an update (unchanged specs are not checked again). */
export async function checkCanaryConfig(store: Store, cc: CanaryConfig, current?: CanaryConfig): Promise<void> {
  if (current && same(current.spec, cc.spec)) return;
  const ns = cc.metadata.namespace;
  const { trigger, newfunction, oldfunction } = cc.spec;
  for (const [field, name] of [
    ['spec.newfunction', newfunction],
    ['spec.oldfunction', oldfunction],
  ] as const) {
    if (!(await store.get('Function', ns, name))) throw invalid(field, `function '${name}' not found in namespace '${ns}'`);
  }
  const ht = await store.get('HTTPTrigger', ns, trigger);
  if (!ht) throw invalid('spec.trigger', `HTTPTrigger '${trigger}' not found in namespace '${ns}'`);
  const ref = ht.spec.functionref;
  if ((ref.type ?? 'name') !== 'function-weights') {
    throw invalid(
      'spec.trigger',
      `HTTPTrigger '${trigger}' calls one function; a canary needs a route that weighs both (flint route create --function ${oldfunction} --weight 100 --function ${newfunction} --weight 0)`,
    );
  }
  for (const [field, name] of [
    ['spec.newfunction', newfunction],
    ['spec.oldfunction', oldfunction],
  ] as const) {
    if (!Object.hasOwn(ref.functionweights ?? {}, name)) throw invalid(field, `HTTPTrigger '${trigger}' does not weigh function '${name}'`);
  }
  const { items } = await store.list('CanaryConfig', { namespace: ns });
  for (const other of items) {
    if (other.metadata.name === cc.metadata.name || other.spec.trigger !== trigger) continue;
    if (isRollingOut(other)) {
      throw new FlintError('FLINT_ERR_ALREADY_EXISTS', `canary config '${other.metadata.name}' is already rolling out on HTTPTrigger '${trigger}'`, { field: 'spec.trigger' });
    }
  }
}
