// Kubernetes mode: where each router pod answers, from the EndpointSlices of
// the chart's router Service, so the canary controller can read every
// router's counters rather than whichever one the Service picks.
import type { GroupVersionResource, KubeClient, KubeObject } from '../store/kube-client.ts';

export const ENDPOINTSLICE_GVR: GroupVersionResource = { group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices' };
/** The chart's router Service (charts/flint/templates/services.yaml) and its port's name. */
export const ROUTER_SERVICE = 'router';
export const ROUTER_PORT_NAME = 'http-router';

interface EndpointSlice extends KubeObject {
  addressType?: string;
  ports?: Array<{ name?: string; port?: number }> | null;
  endpoints?: Array<{ addresses?: string[]; conditions?: { ready?: boolean | null; terminating?: boolean | null } }> | null;
}

/** Base URLs of the ready router pods (`http://10.1.2.3:8080`). */
export async function routerEndpoints(client: KubeClient, namespace: string, service = ROUTER_SERVICE): Promise<string[]> {
  const { items } = await client.list<EndpointSlice>(ENDPOINTSLICE_GVR, namespace, { labelSelector: `kubernetes.io/service-name=${service}` });
  const urls = new Set<string>();
  for (const slice of items) {
    if (slice.addressType === 'FQDN') continue;
    const port = (slice.ports ?? []).find((p) => p.name === ROUTER_PORT_NAME)?.port ?? slice.ports?.[0]?.port;
    if (port === undefined) continue;
    for (const e of slice.endpoints ?? []) {
      // As kube-proxy: an endpoint whose readiness is unknown counts as ready.
      if (e.conditions?.ready === false) continue;
      for (const a of e.addresses ?? []) urls.add(`http://${a.includes(':') ? `[${a}]` : a}:${port}`);
    }
  }
  return [...urls].sort();
}
