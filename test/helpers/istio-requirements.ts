// What Istio reads from the objects of a namespace, checked against its
// documentation, for objects read back from a running cluster. Each rule
// names the page it comes from. Returns one line per problem; none is good.
import { ISTIO_INJECT } from '../../src/executor/kubernetes/pool-deployment.ts';

const DOCS = {
  // "When you set the istio-injection=enabled label on a namespace ... any new pods that are created in that namespace
  // will automatically have a sidecar added"; per pod, sidecar.istio.io/inject "true" or "false", as a label or (its
  // older form) an annotation, the label winning when both are set, and never a pod on the host's network (the
  // injector: istio/istio pkg/kube/inject/webhook.go, injectRequired).
  injection: 'https://istio.io/v1.21/docs/setup/additional-setup/sidecar-injection/#controlling-the-injection-policy',
  // A Service port's protocol: its name, `<protocol>[-<suffix>]`, or its appProtocol, which wins when both are set.
  protocol: 'https://istio.io/v1.21/docs/ops/configuration/traffic-management/protocol-selection/#explicit-protocol-selection',
  // Pods belong to a Service; Services a pod belongs to use one protocol per port number; no container runs as UID
  // 1337 (the sidecar's).
  requirements: 'https://istio.io/v1.17/docs/ops/deployment/requirements/#pod-requirements',
};

const PROTOCOLS = ['http', 'http2', 'https', 'tcp', 'tls', 'grpc', 'grpc-web', 'mongo', 'mysql', 'redis', 'udp'];

/** The protocol Istio gives a Service port, or undefined when it would have to guess (sniffing). */
export function portProtocol(port: { name?: string; appProtocol?: string }): string | undefined {
  if (port.appProtocol) return PROTOCOLS.includes(port.appProtocol) ? port.appProtocol : undefined;
  const name = port.name ?? '';
  return PROTOCOLS.find((p) => name === p || name.startsWith(`${p}-`));
}

const selects = (svc: any, pod: any) => {
  const sel = svc.spec?.selector ?? {};
  return Object.keys(sel).length > 0 && svc.metadata.namespace === pod.metadata.namespace && Object.entries(sel).every(([k, v]) => pod.metadata.labels?.[k] === v);
};

export interface MeshObjects {
  namespace: any;
  services: any[];
  pods: any[];
}

/**
 * Problems Istio would have with `namespace`'s objects. `injected(pod)` says whether the pod should get a sidecar;
 * `inService(pod)` whether it must belong to a Service (Flint's generic pool pods belong to none until claimed).
 */
export function istioProblems(o: MeshObjects, rules: { injected(pod: any): boolean; inService(pod: any): boolean }): string[] {
  const problems: string[] = [];
  const ns = o.namespace.metadata.name;
  if (o.namespace.metadata.labels?.['istio-injection'] !== 'enabled') problems.push(`namespace ${ns} is not labelled istio-injection=enabled (${DOCS.injection})`);
  for (const svc of o.services) {
    for (const port of svc.spec.ports ?? []) {
      if (!portProtocol(port)) problems.push(`Service ${ns}/${svc.metadata.name} port ${port.port} ('${port.name ?? ''}') names no protocol (${DOCS.protocol})`);
    }
  }
  for (const pod of o.pods) {
    const name = `pod ${ns}/${pod.metadata.name}`;
    const label = pod.metadata.labels?.[ISTIO_INJECT];
    const annotation = pod.metadata.annotations?.[ISTIO_INJECT];
    const setting = label ?? annotation;
    if (setting !== undefined && setting !== 'true' && setting !== 'false') problems.push(`${name}: ${ISTIO_INJECT}=${setting} is neither "true" nor "false" (${DOCS.injection})`);
    if (label !== undefined && annotation !== undefined && label !== annotation) problems.push(`${name}: the ${ISTIO_INJECT} label and annotation disagree (${DOCS.injection})`);
    const gets = setting !== 'false' && !pod.spec.hostNetwork;
    if (gets !== rules.injected(pod)) problems.push(`${name} would ${gets ? '' : 'not '}get a sidecar (${DOCS.injection})`);
    const services = o.services.filter((s) => selects(s, pod));
    if (rules.inService(pod) && services.length === 0) problems.push(`${name} belongs to no Service (${DOCS.requirements})`);
    const byPort = new Map<number, Set<string | undefined>>();
    for (const s of services) for (const p of s.spec.ports ?? []) byPort.set(p.port, (byPort.get(p.port) ?? new Set()).add(portProtocol(p)));
    for (const [port, protocols] of byPort) if (protocols.size > 1) problems.push(`${name}: its Services use port ${port} for ${[...protocols].join(' and ')} (${DOCS.requirements})`);
    for (const c of [...(pod.spec.containers ?? []), ...(pod.spec.initContainers ?? [])]) {
      const uid = c.securityContext?.runAsUser ?? pod.spec.securityContext?.runAsUser;
      if (uid === 1337) problems.push(`${name}: container ${c.name} runs as UID 1337, the sidecar's (${DOCS.requirements})`);
    }
  }
  return problems;
}
