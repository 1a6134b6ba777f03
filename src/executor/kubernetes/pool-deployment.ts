// The warm pool of one environment in kubernetes mode: a Deployment of
// generic pods, each with the environment's container (port 8888, named
// http-env) and Flint's fetcher beside it (port 8000, http-fetcher), sharing
// /userfunc, /secrets and /configs. Fission's names and labels, so its
// tooling and habits carry over; the port names let a mesh treat both as
// HTTP. The executor specializes a pod by relabelling it out of the
// Deployment's selector (managed=false), which makes the Deployment start a
// replacement.
import { createHash } from 'node:crypto';
import type { Environment } from '../../api/kinds.ts';
import type { KubeObject } from '../../store/kube-client.ts';

export const ENV_PORT = 8888;
export const FETCHER_PORT = 8000;
export const ISTIO_INJECT = 'sidecar.istio.io/inject';
/** The Secret in the function namespace holding the token every fetcher wants on a specialize request (key `token`). */
export const FETCHER_TOKEN_SECRET = 'flint-fetcher';

export interface PodTemplateOptions {
  namespace: string;
  fetcherImage: string;
  enableIstio: boolean;
}

export interface PoolDeploymentOptions extends PodTemplateOptions {
  /** Replicas of an environment that sets no poolsize. */
  poolSize: number;
  /** Replicas beyond the size, for the first calls of new functions expected soon (first-calls.ts). */
  extra?: number;
}

/** Lower-case DNS-1123 label of at most 63 characters; a long one keeps a hash of the whole. */
export function dnsName(raw: string): string {
  const clean = raw.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '');
  if (clean.length <= 63) return clean;
  const hash = createHash('sha256').update(raw).digest('hex').slice(0, 8);
  return `${clean.slice(0, 54).replace(/-+$/, '')}-${hash}`;
}

/** `poolmgr-<env>-<envns>-<resourceVersion>`: a changed environment gets a new Deployment beside the old. */
export function poolDeploymentName(env: Environment): string {
  return dnsName(`poolmgr-${env.metadata.name}-${env.metadata.namespace}-${env.metadata.resourceVersion}`);
}

export function poolLabels(env: Environment): Record<string, string> {
  return {
    environmentName: env.metadata.name,
    environmentNamespace: env.metadata.namespace,
    environmentUid: env.metadata.uid,
    executorType: 'poolmgr',
  };
}

function resources(env: Environment): Record<string, unknown> | undefined {
  const r = env.spec.resources;
  if (!r) return undefined;
  const list = (l: { cpu?: string | number; memory?: string | number } | undefined) =>
    l && Object.fromEntries(Object.entries(l).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)]));
  return { ...(r.requests ? { requests: list(r.requests) } : {}), ...(r.limits ? { limits: list(r.limits) } : {}) };
}

/** The generic pod of an environment, pool or function Deployment alike: the environment and the fetcher, unspecialized. */
export function genericPodTemplate(env: Environment, labels: Record<string, string>, o: PodTemplateOptions): Record<string, unknown> {
  const annotations: Record<string, string> = {};
  // Fission's rule: an environment allowed out of the cluster skips the sidecar, whose egress rules would hold it in.
  // Istio reads the label (its current API, preferred when both are set) and the annotation (what Fission and older
  // Istio releases use), so the pod says it in both.
  const optOut = o.enableIstio && env.spec.allowAccessToExternalNetwork;
  if (optOut) annotations[ISTIO_INJECT] = 'false';
  const mounts = [
    { name: 'userfunc', mountPath: '/userfunc' },
    { name: 'secrets', mountPath: '/secrets' },
    { name: 'configmaps', mountPath: '/configs' },
  ];
  const runtimeEnv = Object.entries(env.spec.runtime.env ?? {}).map(([name, value]) => ({ name, value }));
  return {
    metadata: { labels: optOut ? { ...labels, [ISTIO_INJECT]: 'false' } : labels, ...(Object.keys(annotations).length > 0 ? { annotations } : {}) },
    spec: {
      containers: [
        {
          name: env.metadata.name,
          image: env.spec.runtime.image,
          ports: [{ name: 'http-env', containerPort: ENV_PORT }],
          ...(runtimeEnv.length > 0 ? { env: runtimeEnv } : {}),
          ...(resources(env) ? { resources: resources(env) } : {}),
          volumeMounts: mounts.map((m) => ({ ...m, readOnly: true })),
        },
        {
          name: 'fetcher',
          image: o.fetcherImage,
          args: ['fetcher', '--port', String(FETCHER_PORT)],
          env: [{ name: 'FLINT_FETCHER_TOKEN', valueFrom: { secretKeyRef: { name: FETCHER_TOKEN_SECRET, key: 'token' } } }],
          ports: [{ name: 'http-fetcher', containerPort: FETCHER_PORT }],
          readinessProbe: { httpGet: { path: '/readiness-healthz', port: FETCHER_PORT }, periodSeconds: 1, failureThreshold: 30 },
          livenessProbe: { httpGet: { path: '/healthz', port: FETCHER_PORT }, periodSeconds: 5 },
          volumeMounts: mounts,
        },
      ],
      volumes: mounts.map((m) => ({ name: m.name, emptyDir: {} })),
      terminationGracePeriodSeconds: env.spec.terminationGracePeriod ?? 90,
      ...(env.spec.imagepullsecret ? { imagePullSecrets: [{ name: env.spec.imagepullsecret }] } : {}),
    },
  };
}

export function poolDeployment(env: Environment, o: PoolDeploymentOptions): KubeObject {
  const labels = poolLabels(env);
  const selector = { ...labels, managed: 'true' };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: poolDeploymentName(env), namespace: o.namespace, labels },
    spec: {
      replicas: (env.spec.poolsize ?? o.poolSize) + (o.extra ?? 0),
      selector: { matchLabels: selector },
      template: genericPodTemplate(env, selector, o),
    },
  };
}
