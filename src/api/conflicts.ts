// Rules between resources that the control plane enforces and that a client
// may check ahead (`spec apply` does, before it writes anything).
import type { FunctionResource, HTTPTrigger } from './kinds.ts';

function methodSet(spec: HTTPTrigger['spec']): string[] {
  const set = new Set((spec.methods ?? []).map((m) => m.toUpperCase()));
  if (spec.method) set.add(spec.method.toUpperCase());
  if (set.size === 0) set.add('GET');
  return [...set].sort();
}

function routeKey(spec: HTTPTrigger['spec']): string {
  const path = spec.prefix ? `prefix:${spec.prefix}` : `url:${spec.relativeurl}`;
  return `${spec.host ?? ''}|${path}`;
}

/** Same host, same URL or prefix, and a method in common: one would shadow the other. */
export function routesCollide(a: HTTPTrigger['spec'], b: HTTPTrigger['spec']): boolean {
  if (routeKey(a) !== routeKey(b)) return false;
  const mb = methodSet(b);
  return methodSet(a).some((m) => mb.includes(m));
}

/** Whether a function runs in this environment, or from this package. */
export function functionUses(fn: FunctionResource, kind: 'Environment' | 'Package', namespace: string, name: string): boolean {
  const ref = kind === 'Environment' ? fn.spec.environment : fn.spec.package.packageref;
  return ref.name === name && (ref.namespace ?? fn.metadata.namespace) === namespace;
}
