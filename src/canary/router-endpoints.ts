// Kubernetes mode: where each router pod answers, so the canary controller
// can read every router's counters rather than whichever one the Service
// picks. The pods are the chart's router Service's: those its selector
// matches, Ready, at their own address and the port the Service targets.
// (Pods rather than EndpointSlices: the pods are what the Service selects
// whoever fills its slices, and a node whose pods have addresses a slice may
// not hold, as the local node agent's loopback ones, still has them.)
import type { GroupVersionResource, KubeClient, KubeObject } from '../store/kube-client.ts';

export const SERVICE_GVR: GroupVersionResource = { group: '', version: 'v1', resource: 'services' };
export const POD_GVR: GroupVersionResource = { group: '', version: 'v1', resource: 'pods' };
/** The chart's router Service (charts/flint/templates/services.yaml). */
export const ROUTER_SERVICE = 'router';

interface Service extends KubeObject {
  spec?: { selector?: Record<string, string>; ports?: Array<{ name?: string; port?: number; targetPort?: number | string }> };
}

interface Pod extends KubeObject {
  spec?: { containers?: Array<{ ports?: Array<{ name?: string; containerPort?: number }> }> };
  status?: { podIP?: string; conditions?: Array<{ type?: string; status?: string }> };
}

/** Base URLs of the Ready pods behind the router Service (`http://10.1.2.3:8080`); none when there is no such Service. */
export async function routerEndpoints(client: KubeClient, namespace: string, service = ROUTER_SERVICE): Promise<string[]> {
  const svc = await client.get<Service>(SERVICE_GVR, namespace, service);
  const selector = svc?.spec?.selector;
  if (!selector || Object.keys(selector).length === 0) return [];
  const target = svc?.spec?.ports?.[0]?.targetPort ?? svc?.spec?.ports?.[0]?.port;
  const labelSelector = Object.entries(selector)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const { items } = await client.list<Pod>(POD_GVR, namespace, { labelSelector });
  const urls: string[] = [];
  for (const pod of items) {
    const ip = pod.status?.podIP;
    const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    if (!ip || !ready || pod.metadata.deletionTimestamp) continue;
    const port =
      typeof target === 'number'
        ? target
        : pod.spec?.containers?.flatMap((c) => c.ports ?? []).find((p) => p.name === target)?.containerPort;
    if (port === undefined) continue;
    urls.push(`http://${ip.includes(':') ? `[${ip}]` : ip}:${port}`);
  }
  return urls.sort();
}

export interface ScrapeOptions {
  /** A bearer token for the routers when authentication is on. */
  token?: () => string | undefined;
  timeoutMs?: number;
  onError?: (url: string, err: unknown) => void;
}

/** Each router's /metrics text (Prometheus exposition format); a router that does not answer 200 is left out (and reported). */
export async function scrapeRouterMetrics(urls: string[], o: ScrapeOptions = {}): Promise<Array<{ source: string; text: string }>> {
  const texts = await Promise.all(
    urls.map(async (url) => {
      try {
        const token = o.token?.();
        const res = await fetch(`${url}/metrics`, {
          headers: token ? { authorization: `Bearer ${token}` } : {},
          signal: AbortSignal.timeout(o.timeoutMs ?? 5000),
        });
        if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
        return { source: url, text: await res.text() };
      } catch (err) {
        o.onError?.(url, err);
        return undefined;
      }
    }),
  );
  return texts.filter((t): t is { source: string; text: string } => t !== undefined);
}
