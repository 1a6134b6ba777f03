// The kubernetes provider: one networking.k8s.io/v1 Ingress per route, in
// the control plane's namespace, whose backend is the router Service. An
// ingress controller in the cluster does the serving; this only keeps the
// objects equal to the desired set.
import { pino, type Logger } from 'pino';
import { isFlintError } from '../api/errors.ts';
import { annotationKeyProblem } from './flags.ts';
import { INGRESS_GVR, type KubeApiError, type KubeClient, type KubeObject } from '../store/kube-client.ts';
import { type ApplyResult, INGRESS_NAMESPACE, type IngressProvider, type IngressSpec } from './provider.ts';

/** Marks the Ingresses this provider owns; it never touches any other. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'flint';
/**
 * The annotation keys that came from the route, so that removing one from the
 * route removes it from the Ingress while annotations other tools add (say
 * cert-manager's) are kept.
 */
export const OWNED_ANNOTATIONS = 'flint.dev/route-annotations';

export interface IngressObject extends KubeObject {
  apiVersion: 'networking.k8s.io/v1';
  kind: 'Ingress';
  spec: {
    ingressClassName?: string;
    rules: Array<{
      host?: string;
      http: {
        paths: Array<{
          path: string;
          pathType: 'ImplementationSpecific' | 'Prefix' | 'Exact';
          backend: { service: { name: string; port: { number: number } } };
        }>;
      };
    }>;
    tls?: Array<{ hosts?: string[]; secretName: string }>;
    [key: string]: unknown;
  };
}

export interface KubernetesIngressOptions {
  client: KubeClient;
  /** Where the Ingresses live; default `flint`. */
  namespace?: string;
  /** The router's Service; default `router`, port 80. */
  routerService?: { name: string; port: number };
  logger?: Logger;
}

export function toIngressObject(spec: IngressSpec, opts: { namespace?: string; routerService?: { name: string; port: number } } = {}): IngressObject {
  const svc = opts.routerService ?? { name: 'router', port: 80 };
  const keys = Object.keys(spec.annotations).sort();
  const annotations: Record<string, string> = { ...spec.annotations };
  if (keys.length > 0) annotations[OWNED_ANNOTATIONS] = keys.join(',');
  const rule: IngressObject['spec']['rules'][number] = {
    http: { paths: [{ path: spec.path, pathType: 'ImplementationSpecific', backend: { service: { name: svc.name, port: { number: svc.port } } } }] },
  };
  // An empty host means every host; Kubernetes spells that by leaving it out.
  if (spec.host) rule.host = spec.host;
  const obj: IngressObject = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: {
      name: spec.name,
      namespace: opts.namespace ?? spec.namespace ?? INGRESS_NAMESPACE,
      labels: { ...spec.labels, [MANAGED_BY_LABEL]: MANAGED_BY },
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
    spec: { rules: [rule] },
  };
  if (spec.tls) {
    // Fission writes hosts: ['*'] for an any-host route, which the API server
    // refuses ('*' is not a DNS name); no hosts means the default certificate.
    obj.spec.tls = [spec.host ? { hosts: [spec.host], secretName: spec.tls.secretName } : { secretName: spec.tls.secretName }];
  }
  return obj;
}

function ownedKeys(obj: KubeObject): string[] {
  const v = obj.metadata.annotations?.[OWNED_ANNOTATIONS];
  return v ? v.split(',').filter(Boolean) : [];
}

/** The current object changed only in the parts this provider owns. */
function merged(current: IngressObject, want: IngressObject): IngressObject {
  const foreign: Record<string, string> = {};
  const owned = new Set([...ownedKeys(current), OWNED_ANNOTATIONS]);
  for (const [k, v] of Object.entries(current.metadata.annotations ?? {})) if (!owned.has(k)) foreign[k] = v;
  const annotations = { ...foreign, ...(want.metadata.annotations ?? {}) };
  const labels = { ...(current.metadata.labels ?? {}), ...want.metadata.labels };
  const spec = { ...current.spec, rules: want.spec.rules } as IngressObject['spec'];
  if (want.spec.tls) spec.tls = want.spec.tls;
  else delete spec.tls;
  const metadata = { ...current.metadata, labels } as IngressObject['metadata'];
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  else delete metadata.annotations;
  return { ...current, metadata, spec };
}

const canon = (v: unknown) => JSON.stringify(v, (_k, x) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b))) : x));

function same(a: IngressObject, b: IngressObject): boolean {
  return (
    canon(a.metadata.labels) === canon(b.metadata.labels) &&
    canon(a.metadata.annotations ?? {}) === canon(b.metadata.annotations ?? {}) &&
    canon(a.spec.rules) === canon(b.spec.rules) &&
    canon(a.spec.tls ?? null) === canon(b.spec.tls ?? null)
  );
}

function isCode(err: unknown, code: string): boolean {
  return isFlintError(err) && err.code === code;
}

export function createKubernetesIngressProvider(opts: KubernetesIngressOptions): IngressProvider {
  const { client } = opts;
  const ns = opts.namespace ?? INGRESS_NAMESPACE;
  const logger = opts.logger ?? pino({ level: 'silent' });

  async function upsert(want: IngressObject, current: IngressObject | undefined): Promise<void> {
    const name = want.metadata.name;
    for (let attempt = 0; ; attempt++) {
      if (!current) {
        try {
          await client.create(INGRESS_GVR, ns, want);
          return;
        } catch (err) {
          if (!isCode(err, 'FLINT_ERR_ALREADY_EXISTS')) throw err;
          current = await client.get<IngressObject>(INGRESS_GVR, ns, name);
          if (current && current.metadata.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) {
            throw new Error(`an Ingress '${ns}/${name}' exists that flint does not manage; rename the route or remove that Ingress`);
          }
          if (!current) continue;
        }
      }
      if (current.metadata.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) {
        throw new Error(`an Ingress '${ns}/${name}' exists that flint does not manage; rename the route or remove that Ingress`);
      }
      const next = merged(current, want);
      if (same(current, next)) return;
      try {
        await client.replace(INGRESS_GVR, ns, name, next);
        return;
      } catch (err) {
        // Someone else wrote it in between: start again from what is there now.
        if (!isCode(err, 'FLINT_ERR_CONFLICT') || attempt >= 4) throw err;
        current = await client.get<IngressObject>(INGRESS_GVR, ns, name);
      }
    }
  }

  return {
    kind: 'kubernetes',
    async start() {},
    // Kubernetes' ingress controller carries the connections: nothing here holds them.
    async stop(whileTunnelsOpen) {
      await whileTunnelsOpen?.();
    },

    async apply(desired) {
      const result: ApplyResult = { skipped: [], warnings: [] };
      const existing = await client.list<IngressObject>(INGRESS_GVR, ns, { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}` });
      const byName = new Map(existing.items.map((i) => [i.metadata.name, i]));
      const failures: string[] = [];
      const wanted = new Set<string>();
      for (const spec of desired) {
        // A route whose new settings cannot be written keeps its previous Ingress.
        wanted.add(spec.name);
        const problem = Object.keys(spec.annotations).map(annotationKeyProblem).find(Boolean);
        if (problem) {
          result.skipped.push({ name: spec.name, reason: problem });
          continue;
        }
        try {
          await upsert(toIngressObject(spec, { namespace: ns, routerService: opts.routerService }), byName.get(spec.name));
        } catch (err) {
          // The API server refusing one object must not hold up the others.
          if (isCode(err, 'FLINT_ERR_VALIDATION') || !isFlintError(err)) result.skipped.push({ name: spec.name, reason: (err as Error).message });
          else failures.push(`${spec.name}: ${(err as KubeApiError).message}`);
        }
      }
      for (const name of byName.keys()) {
        if (wanted.has(name)) continue;
        try {
          await client.delete(INGRESS_GVR, ns, name);
          logger.debug({ ingress: name }, 'ingress deleted');
        } catch (err) {
          failures.push(`${name}: ${(err as Error).message}`);
        }
      }
      if (failures.length > 0) throw new Error(`some Ingresses could not be written: ${failures.join('; ')}`);
      return result;
    },
  };
}
