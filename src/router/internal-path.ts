// The internal function path: `/flint-function/<name>[/sub]` for namespace
// `default`, `/flint-function/<namespace>/<name>[/sub]` otherwise; any
// method, and the function sees `/sub` (or `/`).
import { DEFAULT_NAMESPACE } from '../api/meta.ts';
import { type FnTarget, functionKey } from './targets.ts';

export const INTERNAL_PREFIX = '/flint-function/';

export interface InternalHit {
  target: FnTarget;
  /** Path the function sees, without the query. */
  forwardPath: string;
}

/**
 * `/flint-function/a/b` is ambiguous: function `b` in namespace `a`, or
 * function `a` (namespace default) with sub-path `/b`. The namespaced function
 * wins when it exists, so creating a function can change where such a path
 * goes; URLs built as the docs say never hit the ambiguity.
 */
export function resolveInternal(path: string, functions: ReadonlyMap<string, FnTarget>): InternalHit | undefined {
  const start = INTERNAL_PREFIX.length;
  const s1 = path.indexOf('/', start);
  const first = s1 < 0 ? path.slice(start) : path.slice(start, s1);
  if (first === '') return undefined;
  if (s1 >= 0) {
    const s2 = path.indexOf('/', s1 + 1);
    const second = s2 < 0 ? path.slice(s1 + 1) : path.slice(s1 + 1, s2);
    if (second !== '') {
      const target = functions.get(functionKey(first, second));
      if (target !== undefined) return { target, forwardPath: s2 < 0 ? '/' : path.slice(s2) };
    }
  }
  const target = functions.get(functionKey(DEFAULT_NAMESPACE, first));
  if (target === undefined) return undefined;
  return { target, forwardPath: s1 < 0 ? '/' : path.slice(s1) };
}
