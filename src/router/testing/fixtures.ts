// Resource builders for router tests, shaped as the store hands them out.
import type { FunctionResource, FunctionSpec, HTTPTrigger, HTTPTriggerSpec } from '../../api/kinds.ts';
import type { StoredMeta } from '../../api/meta.ts';

let uid = 0;

function meta(name: string, namespace: string, created: string): StoredMeta {
  uid++;
  return { name, namespace, uid: `uid-${uid}`, resourceVersion: String(uid), generation: 1, creationTimestamp: created };
}

export function fnObj(name: string, opts: { namespace?: string; spec?: Partial<FunctionSpec>; created?: string } = {}): FunctionResource {
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'Function',
    metadata: meta(name, opts.namespace ?? 'default', opts.created ?? '2026-01-01T00:00:00Z'),
    spec: { environment: { name: 'node' }, package: { packageref: { name: `${name}-pkg` } }, ...opts.spec },
  };
}

export type RouteSpec = Omit<HTTPTriggerSpec, 'functionref'> & { fn?: string; functionref?: HTTPTriggerSpec['functionref'] };

export function routeObj(name: string, spec: RouteSpec, opts: { namespace?: string; created?: string } = {}): HTTPTrigger {
  const { fn, functionref, ...rest } = spec;
  return {
    apiVersion: 'flint.dev/v1',
    kind: 'HTTPTrigger',
    metadata: meta(name, opts.namespace ?? 'default', opts.created ?? '2026-01-01T00:00:00Z'),
    spec: { ...rest, functionref: functionref ?? { type: 'name', name: fn ?? 'hello' } },
  };
}
