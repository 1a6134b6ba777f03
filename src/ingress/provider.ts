// What every ingress provider implements, and the one derivation of the
// desired ingresses from the HTTPTriggers, so that the builtin gateway, nginx
// and Kubernetes all expose exactly the same set.
import type { HTTPTrigger, HTTPTriggerSpec, Secret } from '../api/kinds.ts';
import { SYSTEM_NAMESPACE } from '../api/meta.ts';
import { ingressPathProblem, parsePathRule, type RouteTarget } from './paths.ts';

/** What every provider answers for a request no ingress claims, as ingress-nginx's default backend does. */
export const DEFAULT_BACKEND_BODY = 'default backend - 404';

/** Ingresses live in the control plane's namespace, whatever the route's namespace. */
export const INGRESS_NAMESPACE = SYSTEM_NAMESPACE;

export interface TlsMaterial {
  /** PEM certificate chain. */
  cert: string;
  /** PEM private key. */
  key: string;
}

export interface IngressTls {
  secretName: string;
  /** Host names the certificate is for; empty for an any-host ingress. */
  hosts: string[];
  /**
   * The certificate and key from the secret (`tls.crt`, `tls.key`), when the
   * secret exists and holds both. Local providers need it; Kubernetes reads
   * the secret itself.
   */
  material?: TlsMaterial;
  /** Why `material` is missing, for logs. */
  problem?: string;
}

/** One ingress, in a provider-neutral form. */
export interface IngressSpec {
  /** The route's name. */
  name: string;
  namespace: string;
  labels: { functionName: string; triggerName: string; triggerNamespace: string };
  annotations: Record<string, string>;
  /** Lower-case host name, `*.example.com`, or '' for any host. */
  host: string;
  /** Ingress path as written: `/hello`, `/api/*`. */
  path: string;
  /** True when `path` is the route's prefix (router prefix rules apply). */
  routePrefix: boolean;
  /** Where the route lives at the router, for rewriting a differing path. */
  target: RouteTarget;
  tls?: IngressTls;
}

export interface IngressProvider {
  readonly kind: 'builtin' | 'nginx' | 'kubernetes';
  start(): Promise<void>;
  /**
   * Full-state reconcile: afterwards exactly `desired` is exposed (and
   * anything this provider exposed before but is not in `desired` is gone).
   * Calls are serialized by the caller. Resolves once the change is live;
   * rejects when nothing could be applied (the previous state stays).
   * Ingresses that cannot be applied on their own are skipped and reported
   * in the result rather than failing the rest.
   */
  apply(desired: readonly IngressSpec[]): Promise<ApplyResult>;
  /**
   * Stops taking connections and lets requests in flight finish. Upgraded
   * connections (WebSockets) stay open while `whileTunnelsOpen` runs, so that
   * what is behind them (the router and its instances, stopping too) can
   * close them properly: a WebSocket client gets its close frame rather than
   * a cut. Whatever is still open after it is cut. `whileTunnelsOpen` runs
   * once per call, even when the provider was not running.
   */
  stop(whileTunnelsOpen?: () => Promise<void>): Promise<void>;
}

export interface ApplyResult {
  /** Ingresses left out, with the reason. */
  skipped: Array<{ name: string; reason: string }>;
  /** Ingresses applied only in part (say, served without their bad certificate). */
  warnings: Array<{ name: string; reason: string }>;
}

export interface DerivedIngresses {
  /** Oldest route first. */
  desired: IngressSpec[];
  /** Routes asking for an ingress that cannot get one, with the reason. */
  problems: Array<{ namespace: string; name: string; reason: string }>;
}

/** The ingress host, path and TLS a route gets, for display (`route list`) and derivation. */
export interface EffectiveIngress {
  enabled: boolean;
  /** '' = any host. */
  host: string;
  path: string;
  routePrefix: boolean;
  tls: string;
  annotations: Record<string, string>;
}

function routePath(spec: HTTPTriggerSpec): { path: string; prefix: boolean } {
  if (spec.prefix) return { path: spec.prefix, prefix: true };
  return { path: spec.relativeurl ?? '', prefix: false };
}

/**
 * Each field falls back on its own: no ingress host means the route's `host`
 * (or any host), no ingress path means the route's url or prefix. Fission
 * takes the ingressconfig host and path only when both are set; falling back
 * per field keeps a route that only names a host on its current url.
 */
export function effectiveIngress(spec: HTTPTriggerSpec): EffectiveIngress {
  const ic = spec.ingressconfig ?? {};
  const route = routePath(spec);
  let host = ic.host ? ic.host : (spec.host ?? '');
  if (host === '*') host = '';
  // The router matches a route host with its port; an ingress host has none.
  host = host.replace(/:\d+$/, '').toLowerCase();
  const path = ic.path ? ic.path : route.path;
  return {
    enabled: spec.createingress === true,
    host,
    path,
    routePrefix: !ic.path && route.prefix,
    tls: ic.tls ?? '',
    annotations: { ...(ic.annotations ?? {}) },
  };
}

/** The function a route calls, for the `functionName` label: the heaviest one of a canary. */
export function primaryFunction(spec: HTTPTriggerSpec): string {
  const ref = spec.functionref;
  if ((ref.type ?? 'name') === 'name') return ref.name ?? '';
  const weights = Object.entries(ref.functionweights ?? {}).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return weights[0]?.[0] ?? '';
}

/** Reads a TLS secret the way Kubernetes lays it out (`tls.crt`, `tls.key`). */
export function tlsMaterial(secret: Secret | undefined): { material?: TlsMaterial; problem?: string } {
  if (!secret) return { problem: 'secret not found' };
  const cert = pem(secret.data?.['tls.crt']);
  const key = pem(secret.data?.['tls.key']);
  if (!cert || !key) return { problem: "secret must hold PEM 'tls.crt' and 'tls.key'" };
  return { material: { cert, key } };
}

/** Secret values are plain text in Flint; base64 (as in Kubernetes manifests) is accepted too. */
function pem(value: string | undefined): string | undefined {
  if (!value) return undefined;
  if (value.includes('-----BEGIN ')) return value;
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  return decoded.includes('-----BEGIN ') ? decoded : undefined;
}

export type SecretLookup = (namespace: string, name: string) => Secret | undefined;

const HOST_RE = /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Desired ingresses from every trigger with `createingress: true`. A TLS
 * secret is looked up in the route's namespace, then in `flint` (where
 * Kubernetes needs it, since the Ingress lives there). Two routes of the
 * same name in different namespaces would need the same Ingress name: the
 * oldest keeps it and the other is reported.
 */
export function deriveIngresses(triggers: Iterable<HTTPTrigger>, secrets: SecretLookup): DerivedIngresses {
  const sorted = [...triggers]
    .filter((t) => t.spec.createingress === true)
    .sort(
      (a, b) =>
        (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? '') ||
        a.metadata.namespace.localeCompare(b.metadata.namespace) ||
        a.metadata.name.localeCompare(b.metadata.name),
    );
  const desired: IngressSpec[] = [];
  const problems: DerivedIngresses['problems'] = [];
  const owner = new Map<string, HTTPTrigger>();
  for (const t of sorted) {
    const { name, namespace } = t.metadata;
    const fail = (reason: string) => problems.push({ namespace, name, reason });
    const taken = owner.get(name);
    if (taken) {
      fail(`ingress name '${name}' is already used by the route in namespace '${taken.metadata.namespace}'`);
      continue;
    }
    const eff = effectiveIngress(t.spec);
    if (eff.host && !HOST_RE.test(eff.host)) {
      fail(`ingress host '${eff.host}' is not '*' or a DNS name`);
      continue;
    }
    const pathProblem = ingressPathProblem(eff.path);
    if (pathProblem) {
      fail(`ingress path ${pathProblem}`);
      continue;
    }
    try {
      parsePathRule(eff.path, { routePrefix: eff.routePrefix });
    } catch (err) {
      fail((err as Error).message);
      continue;
    }
    owner.set(name, t);
    const route = routePath(t.spec);
    const spec: IngressSpec = {
      name,
      namespace: INGRESS_NAMESPACE,
      labels: { functionName: primaryFunction(t.spec), triggerName: name, triggerNamespace: namespace },
      annotations: eff.annotations,
      host: eff.host,
      path: eff.path,
      routePrefix: eff.routePrefix,
      target: { path: route.path, prefix: route.prefix },
    };
    if (eff.tls) {
      const found = tlsMaterial(secrets(namespace, eff.tls) ?? secrets(INGRESS_NAMESPACE, eff.tls));
      spec.tls = { secretName: eff.tls, hosts: eff.host ? [eff.host] : [], ...found };
    }
    desired.push(spec);
  }
  return { desired, problems };
}

/** A stable text form of a desired set: equal text, nothing to re-apply. */
export function fingerprint(desired: readonly IngressSpec[]): string {
  return JSON.stringify(desired, (_k, v) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  );
}
