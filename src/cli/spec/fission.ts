// Fission spec files (`fission.io/v1`) to Flint resources. The kinds and
// field names are Fission's, with two differences this undoes: Fission writes
// the invoke strategy with capitalized keys, and `fission ... --spec` dumps
// every empty and zero-valued field (`creationTimestamp: null`,
// `builder: {}`, `TargetCPUPercent: 0`, a status). Anything else Flint does
// not know is left in place, so validation names it.
import { API_VERSION } from '../../api/meta.ts';

const RENAMED: Record<string, string> = {
  InvokeStrategy: 'invokeStrategy',
  StrategyType: 'strategyType',
  ExecutionStrategy: 'executionStrategy',
  ExecutorType: 'executorType',
  MinScale: 'minScale',
  MaxScale: 'maxScale',
  TargetCPUPercent: 'targetCPU',
  SpecializationTimeout: 'specializationTimeout',
};

/** Fields Fission writes with a zero meaning "not set". */
const ZERO_MEANS_UNSET = new Set(['targetCPU']);

function isEmpty(v: unknown): boolean {
  if (v === null || v === undefined || v === '') return true;
  if (Array.isArray(v)) return v.length === 0;
  return typeof v === 'object' && Object.keys(v as object).length === 0;
}

function clean(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(clean);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, raw] of Object.entries(v as Record<string, unknown>)) {
    const key = RENAMED[k] ?? k;
    const value = clean(raw);
    if (isEmpty(value) || (ZERO_MEANS_UNSET.has(key) && value === 0)) continue;
    out[key] = value;
  }
  return out;
}

export function fromFission(doc: Record<string, unknown>): Record<string, unknown> {
  const { status: _status, ...rest } = doc;
  const out = clean(rest) as Record<string, unknown>;
  out.apiVersion = API_VERSION;
  return out;
}
