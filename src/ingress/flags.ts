// The values of `route create|update` ingress flags, parsed and checked here
// so the CLI stays thin and the rules sit next to the providers that depend
// on them:
//   --createingress[=false]
//   --ingressrule host=path      ('*' = any host; path may end in '/*'; '-' resets to the route's url, any host)
//   --ingressannotation k=v      (repeatable; '-' removes them all; on update, merged into the existing ones)
//   --ingresstls <secret>        ('-' removes TLS)
// Pure functions: no I/O, errors are FlintError FLINT_ERR_USAGE naming the flag.
import { FlintError } from '../api/errors.ts';
import type { HTTPTriggerSpec } from '../api/kinds.ts';
import { ingressPathProblem, parsePathRule } from './paths.ts';

/** The value that resets a setting. */
export const CLEAR = '-';

export interface IngressRule {
  /** Lower-case DNS name, `*.example.com`, or `*` for any host. */
  host: string;
  path: string;
}

const RULE_EXAMPLE = "for example '*=/hello' or 'example.com=/api/*'";
const HOST_RE = /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

function usage(flag: string, message: string): FlintError {
  return new FlintError('FLINT_ERR_USAGE', `${flag} ${message}`, { field: flag });
}

/** Splits `a=b` on its only '='; refuses none or several. */
function pair(flag: string, text: string, shape: string, extra = ''): [string, string] {
  const parts = text.split('=');
  if (parts.length < 2) throw usage(flag, `'${text}' is not ${shape}${extra}`);
  if (parts.length > 2) throw usage(flag, `'${text}' has more than one '=': use ${shape}${extra}`);
  return [parts[0], parts[1]];
}

/** Why a host cannot be an ingress host, or undefined. `*` means any host. */
export function ingressHostProblem(host: string): string | undefined {
  if (host === '') return "is empty; use '*' for any host";
  if (host === '*') return undefined;
  if (host.length > 253 || !HOST_RE.test(host) || host.split('.').some((l) => l.length > 63)) {
    return `'${host}' is not '*' or a DNS name (such as example.com or *.example.com)`;
  }
  return undefined;
}

/** Why a key cannot be an annotation key (Kubernetes qualified name), or undefined. */
export function annotationKeyProblem(key: string): string | undefined {
  if (key === '') return 'the key is empty';
  const slash = key.indexOf('/');
  if (!QUALIFIED_NAME.test(key) || slash > 253) {
    return `'${key}' is not a valid annotation key: [prefix/]name, the name at most 63 letters, digits, '-', '_' or '.', the prefix a DNS name`;
  }
  return undefined;
}

/** `host=path`, or null for '-' (back to any host and the route's own url). */
export function parseIngressRule(text: string): IngressRule | null {
  const flag = '--ingressrule';
  const t = text.trim();
  if (t === CLEAR) return null;
  if (t === '') throw usage(flag, `needs host=path (${RULE_EXAMPLE}), or '-' to reset it`);
  const [rawHost, path] = pair(flag, t, 'host=path', ` (${RULE_EXAMPLE})`);
  const host = rawHost.trim().toLowerCase();
  const hostProblem = ingressHostProblem(host);
  if (hostProblem) throw usage(flag, `'${t}': the host ${hostProblem}`);
  if (path === '') throw usage(flag, `'${t}': the path is empty; give a path such as /hello or /api/*`);
  const pathProblem = ingressPathProblem(path);
  if (pathProblem) throw usage(flag, `'${t}': the path ${pathProblem}`);
  try {
    parsePathRule(path);
  } catch (err) {
    throw usage(flag, `'${t}': ${(err as Error).message}`);
  }
  return { host, path };
}

/** `key=value` (the value may be empty). */
export function parseAnnotation(text: string): [string, string] {
  const flag = '--ingressannotation';
  const [key, value] = pair(flag, text, 'key=value', text.split('=').length > 2 ? "; a value holding '=' can be set in a spec file (spec apply)" : '');
  const problem = annotationKeyProblem(key.trim());
  if (problem) throw usage(flag, `'${text}': ${problem}`);
  return [key.trim(), value];
}

export interface AnnotationChange {
  /** '-' was given: drop the existing annotations first. */
  clear: boolean;
  set: Record<string, string>;
}

export function parseAnnotations(values: readonly string[]): AnnotationChange {
  const out: AnnotationChange = { clear: false, set: {} };
  for (const v of values) {
    if (v.trim() === CLEAR) {
      out.clear = true;
      continue;
    }
    const [k, val] = parseAnnotation(v);
    if (Object.hasOwn(out.set, k)) throw usage('--ingressannotation', `'${k}' is given twice`);
    out.set[k] = val;
  }
  return out;
}

/** A secret name, or null for '-'. */
export function parseIngressTls(text: string): string | null {
  const flag = '--ingresstls';
  const t = text.trim();
  if (t === CLEAR) return null;
  if (t === '') throw usage(flag, "needs the name of a secret holding tls.crt and tls.key, or '-' to remove TLS");
  if (t.length > 253 || !SUBDOMAIN_RE.test(t)) throw usage(flag, `'${t}' is not a valid secret name (lowercase letters, digits, '-' and '.')`);
  return t;
}

/** `--createingress [bool]`: true when given bare, else 'true' or 'false'. */
export function parseCreateIngress(value: string | boolean): boolean {
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw usage('--createingress', `must be true or false, got '${value}'`);
}

export interface IngressFlagValues {
  /** --createingress (true, or commander's 'true'/'false' string for --createingress=false); undefined when not given. */
  createingress?: boolean | string;
  ingressrule?: string;
  /** Every --ingressannotation, in order. */
  ingressannotation?: readonly string[];
  ingresstls?: string;
}

/**
 * The route spec with the ingress flags applied. For `route create` pass the
 * new spec; for `route update` the stored one (annotations merge into the
 * existing ones unless '-' is among them). Throws FLINT_ERR_USAGE on a bad
 * value before anything changes. Without a rule the ingress follows the
 * route's url (any host), even when the url changes later.
 */
export function applyIngressFlags(spec: HTTPTriggerSpec, flags: IngressFlagValues): { spec: HTTPTriggerSpec; warnings: string[] } {
  // Parse everything first: one bad flag changes nothing.
  const rule = flags.ingressrule === undefined ? undefined : parseIngressRule(flags.ingressrule);
  const ann = flags.ingressannotation && flags.ingressannotation.length > 0 ? parseAnnotations(flags.ingressannotation) : undefined;
  const tls = flags.ingresstls === undefined ? undefined : parseIngressTls(flags.ingresstls);
  const create = flags.createingress === undefined ? undefined : parseCreateIngress(flags.createingress);

  const next = structuredClone(spec);
  if (create !== undefined) next.createingress = create;
  const ic = { ...(next.ingressconfig ?? {}) };
  if (rule === null) {
    delete ic.host;
    delete ic.path;
  } else if (rule) {
    ic.host = rule.host;
    ic.path = rule.path;
  }
  if (ann) {
    const merged = { ...(ann.clear ? {} : (ic.annotations ?? {})), ...ann.set };
    if (Object.keys(merged).length > 0) ic.annotations = merged;
    else delete ic.annotations;
  }
  if (tls === null) delete ic.tls;
  else if (tls) ic.tls = tls;
  if (Object.keys(ic).length > 0) next.ingressconfig = ic;
  else delete next.ingressconfig;

  const warnings: string[] = [];
  const touched = flags.ingressrule !== undefined || ann !== undefined || flags.ingresstls !== undefined;
  if (touched && next.createingress !== true) {
    warnings.push('the ingress settings are saved but take effect only with --createingress');
  }
  return { spec: next, warnings };
}

/** The HOST column of `route list`: the ingress host when one is set, else the route's host. */
export function routeListHost(spec: HTTPTriggerSpec): string {
  return spec.ingressconfig?.host || spec.host || '';
}
