// Methods as bits, so a route's method check on the hot path is one AND.
import { HTTP_METHOD_NAMES } from '../api/kinds.ts';

const BITS: Record<string, number> = Object.create(null);
HTTP_METHOD_NAMES.forEach((m, i) => {
  BITS[m] = 1 << i;
});

/** 0 for a method no route can declare (the HTTP parser accepts e.g. PROPFIND). */
export function methodBit(method: string): number {
  return BITS[method] ?? 0;
}

/** A trigger's method set: `methods` plus `method`, GET when both are empty. */
export function triggerMethods(spec: { method?: string; methods?: string[] }): string[] {
  const set = new Set<string>();
  for (const m of spec.methods ?? []) set.add(m.toUpperCase());
  if (spec.method) set.add(spec.method.toUpperCase());
  if (set.size === 0) set.add('GET');
  return HTTP_METHOD_NAMES.filter((m) => set.has(m));
}

export function maskOf(methods: readonly string[]): number {
  let mask = 0;
  for (const m of methods) mask |= methodBit(m);
  return mask;
}

/** The `Allow` value for a mask, in the canonical method order. */
export function allowOf(mask: number): string {
  return HTTP_METHOD_NAMES.filter((m) => (mask & methodBit(m)) !== 0).join(', ');
}
