// Fission spec files (`fission.io/v1`) to Flint resources. The kinds and
// field names are Fission's, with two differences this undoes: Fission writes
// the invoke strategy with capitalized keys, and `fission ... --spec` dumps
// every empty and zero-valued field (`creationTimestamp: null`,
// `builder: {}`, `TargetCPUPercent: 0`, a status); the user's own maps
// (data, labels, annotations, env) are kept as written. Anything else Flint
// does not know is left in place, so validation names it.
import { API_VERSION } from '../../api/names.ts';

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

/** Maps whose keys and values are the user's own, kept as written. */
const VERBATIM = new Set(['data', 'labels', 'annotations', 'env', 'metadata', 'functionweights']);

function clean(v: unknown, inInvokeStrategy = false): unknown {
  if (Array.isArray(v)) return v.map((x) => clean(x, inInvokeStrategy));
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, raw] of Object.entries(v as Record<string, unknown>)) {
    const invoke = inInvokeStrategy || k === 'InvokeStrategy';
    const key = invoke ? (RENAMED[k] ?? k) : k;
    const value = VERBATIM.has(k) && raw !== null && typeof raw === 'object' ? raw : clean(raw, invoke);
    if (isEmpty(value) || (ZERO_MEANS_UNSET.has(key) && value === 0)) continue;
    out[key] = value;
  }
  return out;
}

export function fromFission(doc: Record<string, unknown>): Record<string, unknown> {
  const { status: _status, ...rest } = doc;
  const out = clean(rest) as Record<string, unknown>;
  // metadata is the user's except for what `--spec` writes empty.
  const meta = out.metadata as Record<string, unknown> | undefined;
  if (meta) for (const k of Object.keys(meta)) if (meta[k] === null || (k === 'creationTimestamp' && meta[k] === '')) delete meta[k];
  out.apiVersion = API_VERSION;
  return out;
}
