// Flag value parsers: each refuses a bad value with a message naming the flag,
// before anything is sent to the control plane.
import { FlintError } from '../api/errors.ts';
import { DNS1123_LABEL } from '../api/names.ts';

const NAME = new RegExp(DNS1123_LABEL);

export function usage(message: string): FlintError {
  return new FlintError('FLINT_ERR_USAGE', message);
}

export function checkName(flag: string, value: string): string {
  if (!NAME.test(value) || value.length > 63) {
    throw usage(`${flag} '${value}' is not a valid name: use lowercase letters, digits and '-', starting and ending with a letter or digit (at most 63 characters)`);
  }
  return value;
}

export function intFlag(flag: string, min: number, max = Number.MAX_SAFE_INTEGER): (v: string) => number {
  return (v: string) => {
    if (!/^-?[0-9]+$/.test(v.trim())) throw usage(`${flag} must be a whole number, got '${v}'`);
    const n = Number(v);
    if (n < min || n > max) throw usage(`${flag} must be between ${min} and ${max}, got ${n}`);
    return n;
  };
}

/** Parses `key=value`; the value may contain '=' only where allowed. */
export function keyValue(flag: string, v: string, opts: { allowEqualsInValue?: boolean } = {}): [string, string] {
  const i = v.indexOf('=');
  if (i <= 0) throw usage(`${flag} needs key=value, got '${v}'`);
  const key = v.slice(0, i).trim();
  const value = v.slice(i + 1);
  if (!opts.allowEqualsInValue && value.includes('=')) throw usage(`${flag} needs key=value, got '${v}' (more than one '=')`);
  return [key, value];
}

export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function kvMap(flag: string, values: string[] | undefined, opts?: { allowEqualsInValue?: boolean }): Record<string, string> | undefined {
  if (!values || values.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const v of values) {
    const [k, val] = keyValue(flag, v, opts);
    out[k] = val;
  }
  return out;
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE'];

export function httpMethod(v: string): string {
  const m = v.trim().toUpperCase();
  if (!METHODS.includes(m)) throw usage(`invalid or unsupported HTTP method '${v}': use one of ${METHODS.join(', ')}`);
  return m;
}

export function bool(flag: string, v: string | boolean | undefined): boolean | undefined {
  if (v === undefined || typeof v === 'boolean') return v;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw usage(`${flag} must be true or false, got '${v}'`);
}

/** Kubernetes-style quantities for --mincpu (millicores) and --minmemory (MiB). */
export function cpuQuantity(flag: string, v: number | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (v <= 0) throw usage(`${flag} must be positive`);
  return `${v}m`;
}

export function memoryQuantity(flag: string, v: number | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (v <= 0) throw usage(`${flag} must be positive`);
  return `${v}Mi`;
}

/** Fission's KubifyName: lowercase, [-a-z0-9] only, starting with a letter, at most 63 characters. */
export function kubifyName(s: string): string {
  let n = s.toLowerCase().replace(/[^-a-z0-9]/g, '-');
  n = n.replace(/^[^a-z]+/, '').replace(/[^a-z0-9]+$/, '');
  n = n.slice(0, 63).replace(/[^a-z0-9]+$/, '');
  return n || 'default';
}
