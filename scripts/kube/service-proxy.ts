// Services for a node agent's pods, as kube-proxy's old userspace mode and
// cluster DNS give them in a cluster: each Service (ClusterIP, NodePort or
// LoadBalancer, with a selector, not headless) gets a loopback address of
// its own, a TCP listener on that address for each of its ports forwards
// every connection to one of its endpoints (round robin over the ready
// ones; a terminating pod that still passes its readiness probe only when
// no endpoint is ready, as kube-proxy does; a failed dial tries the next),
// and `hosts()` names the address the way cluster DNS would
// (`<svc>.<ns>.svc.cluster.local`, `<svc>.<ns>.svc`, `<svc>.<ns>`, and the
// bare name in the pod's own namespace), for a pod's /etc/hosts.
//
// Where it differs, and why:
// - Endpoints come from the node agent's own pods, matched against the
//   Service's selector and targetPort as the EndpointSlice controller
//   would, not from EndpointSlices: the API server refuses loopback
//   addresses in an EndpointSlice, and pod IPs here are loopback addresses.
//   So a Service reaches only pods of this node agent (one node is what
//   `npm run kube` and the tests run), and a Service without a selector
//   (hand-written EndpointSlices) reaches nothing.
// - The address is not the Service's ClusterIP: a ClusterIP is routable
//   only through the packet rewriting kube-proxy does as root, which would
//   change the whole machine's network. Clients that use the Service's DNS
//   name (everything Flint does) do not see the difference; the ClusterIP
//   itself reaches nothing here.
// - A port below 1024 (the chart's Services listen on 80) needs root or
//   CAP_NET_BIND_SERVICE, as a listener on it would anywhere. A port that
//   cannot be bound is reported once and left out.
// - It reads Services as `system:kube-proxy`, the identity the bootstrap
//   RBAC policy gives kube-proxy (system:node-proxier).
import net from 'node:net';
import type { GroupVersionResource, KubeClient, KubeObject, KubeWatch } from '../../src/store/kube-client.ts';

const SERVICES: GroupVersionResource = { group: '', version: 'v1', resource: 'services' };
export const CLUSTER_DOMAIN = 'cluster.local';

/** A pod as the node agent runs it. */
export interface PodView {
  pod: any;
  ip: string;
  /** Passes its readiness probes (the Ready condition the agent writes). */
  ready: boolean;
  /** Deleted, and stopping. */
  terminating: boolean;
}

export interface ServiceProxyOptions {
  client: KubeClient;
  /** The node agent's pods, read at each connection. */
  pods(): Iterable<PodView>;
  /** The second octet of the loopback addresses (the node agent's block): addresses are 127.<block>.255.<n>. */
  block: number;
  /** Called after the set of Services (their names and addresses) changed. */
  onChange?: () => void;
  log?: (line: string) => void;
}

export interface ServiceProxy {
  /** The address standing for a Service, once it is proxied. */
  address(namespace: string, name: string): string | undefined;
  /** `/etc/hosts` lines naming every proxied Service, for a pod in `namespace`. */
  hosts(namespace: string): string[];
  stop(): Promise<void>;
}

interface Listener {
  server: net.Server;
  /** A port number, or the name of a container port. */
  targetPort: number | string;
  next: number;
}

interface Proxied {
  key: string;
  address: string;
  selector: Record<string, string>;
  listeners: Map<number, Listener>;
  spec: string;
}

/** The port a pod serves a Service's targetPort on: a number as it is, a name looked up among its containers' ports. */
function podPort(pod: any, target: number | string): number | undefined {
  if (typeof target === 'number') return target;
  for (const c of pod.spec?.containers ?? []) {
    const p = (c.ports ?? []).find((x: any) => x.name === target && (x.protocol ?? 'TCP') === 'TCP');
    if (p) return p.containerPort;
  }
  return undefined;
}

/** List, then watch from the list's version; a broken stream or a 410 lists again. Every listing is handed over whole. */
function follow(
  client: KubeClient,
  gvr: GroupVersionResource,
  isStopped: () => boolean,
  onList: (items: KubeObject[]) => void,
  onEvent: (type: string, obj: KubeObject) => void,
  log: (line: string) => void,
): { done: Promise<void>; close(): void } {
  let watch: KubeWatch | undefined;
  const done = (async () => {
    while (!isStopped()) {
      try {
        const list = await client.list<KubeObject>(gvr, undefined);
        onList(list.items);
        let version = list.metadata.resourceVersion ?? '0';
        while (!isStopped()) {
          watch = client.watch<KubeObject>(gvr, undefined, { resourceVersion: version, timeoutSeconds: 300 }, (ev) => {
            if (ev.object?.metadata?.resourceVersion) version = ev.object.metadata.resourceVersion;
            if (ev.type !== 'BOOKMARK') onEvent(ev.type, ev.object);
          });
          await watch.done;
        }
      } catch (err) {
        if (isStopped()) return;
        const code = (err as { code?: string }).code;
        if (code !== 'FLINT_ERR_GONE') log(`[service-proxy] ${gvr.resource}: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, code === 'FLINT_ERR_GONE' ? 0 : 1000));
      }
    }
  })();
  return { done, close: () => watch?.close() };
}

export function startServiceProxy(o: ServiceProxyOptions): ServiceProxy {
  const log = o.log ?? (() => {});
  let stopped = false;
  const services = new Map<string, Proxied>();
  /** Addresses once given stay with their Service's name, so a Service made again keeps its address. */
  const addresses = new Map<string, string>();
  let nextHost = 1;
  const sockets = new Set<net.Socket>();
  const refused = new Set<string>();

  const keyOf = (obj: KubeObject) => `${obj.metadata.namespace}/${obj.metadata.name}`;
  const proxied = (svc: any) => svc.spec?.type !== 'ExternalName' && svc.spec?.clusterIP !== 'None' && Array.isArray(svc.spec?.ports);

  /** The EndpointSlice controller's choice: pods of the Service's namespace its selector matches, with an IP. */
  function endpointsOf(p: Proxied, l: Listener): Array<{ ip: string; port: number }> {
    const [namespace] = p.key.split('/');
    const matching = [...o.pods()].filter(
      (v) => v.pod.metadata.namespace === namespace && v.ip && Object.entries(p.selector).every(([k, val]) => v.pod.metadata.labels?.[k] === val),
    );
    const withPort = (v: PodView) => {
      const port = podPort(v.pod, l.targetPort);
      return port === undefined ? [] : [{ ip: v.ip, port }];
    };
    const ready = matching.filter((v) => v.ready && !v.terminating).flatMap(withPort);
    return ready.length > 0 ? ready : matching.filter((v) => v.ready && v.terminating).flatMap(withPort);
  }

  function forward(client: net.Socket, p: Proxied, entry: Listener): void {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    const candidates = endpointsOf(p, entry);
    if (candidates.length === 0) {
      // No endpoint: the connection is refused, as kube-proxy's REJECT rule does.
      client.resetAndDestroy();
      return;
    }
    const start = entry.next++ % candidates.length;
    const order = candidates.slice(start).concat(candidates.slice(0, start));
    const attempt = (i: number) => {
      if (i >= order.length || client.destroyed) {
        client.resetAndDestroy();
        return;
      }
      const upstream = net.connect({ host: order[i].ip, port: order[i].port });
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      let connected = false;
      upstream.once('connect', () => {
        connected = true;
        upstream.setNoDelay(true);
        client.setNoDelay(true);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      upstream.on('error', () => {
        // A dial that failed tries the next endpoint (userspace kube-proxy did); a connection that broke is cut both ways.
        if (!connected) attempt(i + 1);
        else client.destroy();
      });
      upstream.on('close', () => {
        if (connected) client.destroy();
      });
      client.on('close', () => upstream.destroy());
    };
    attempt(0);
  }

  function addressFor(key: string): string {
    let a = addresses.get(key);
    if (!a) {
      if (nextHost > 254) throw new Error('the service proxy has no loopback address left (254 Services)');
      a = `127.${o.block}.255.${nextHost++}`;
      addresses.set(key, a);
    }
    return a;
  }

  function close(p: Proxied): void {
    for (const l of p.listeners.values()) l.server.close();
    services.delete(p.key);
  }

  function upsertService(svc: any): boolean {
    const key = keyOf(svc);
    const current = services.get(key);
    if (!proxied(svc)) {
      if (!current) return false;
      close(current);
      return true;
    }
    const ports = (svc.spec.ports as any[]).filter((p) => (p.protocol ?? 'TCP') === 'TCP');
    const selector: Record<string, string> = svc.spec.selector ?? {};
    const spec = JSON.stringify([ports.map((p) => [p.port, p.targetPort ?? p.port]), selector]);
    if (current?.spec === spec) return false;
    if (current) close(current);
    const address = addressFor(key);
    const p: Proxied = { key, address, selector, listeners: new Map(), spec };
    if (Object.keys(selector).length === 0) log(`[service-proxy] Service ${key} has no selector: it reaches nothing here (no EndpointSlices are read)`);
    for (const port of ports) {
      const entry: Listener = { targetPort: port.targetPort ?? port.port, next: 0, server: net.createServer({ pauseOnConnect: true }, (c) => forward(c, p, entry)) };
      entry.server.on('error', (err) => {
        const what = `${key}:${port.port}`;
        if (!refused.has(what)) log(`[service-proxy] cannot listen for Service ${what} on ${address}: ${err.message}`);
        refused.add(what);
      });
      entry.server.listen(port.port, address);
      p.listeners.set(port.port, entry);
    }
    services.set(key, p);
    log(`[service-proxy] Service ${key} on ${address} (ports ${ports.map((x) => x.port).join(', ')})`);
    return true;
  }

  const changed = () => o.onChange?.();
  const serviceFeed = follow(
    o.client,
    SERVICES,
    () => stopped,
    (items) => {
      const seen = new Set(items.map(keyOf));
      let any = false;
      for (const p of [...services.values()]) {
        if (!seen.has(p.key)) {
          close(p);
          any = true;
        }
      }
      for (const s of items) any = upsertService(s) || any;
      if (any) changed();
    },
    (type, s) => {
      const p = services.get(keyOf(s));
      if (type === 'DELETED') {
        if (p) {
          close(p);
          changed();
        }
      } else if (upsertService(s)) changed();
    },
    log,
  );

  return {
    address: (namespace, name) => services.get(`${namespace}/${name}`)?.address,
    hosts(namespace) {
      return [...services.values()]
        .sort((a, b) => a.key.localeCompare(b.key))
        .map((p) => {
          const [ns, name] = p.key.split('/');
          const names = [`${name}.${ns}.svc.${CLUSTER_DOMAIN}`, `${name}.${ns}.svc`, `${name}.${ns}`, ...(ns === namespace ? [name] : [])];
          return `${p.address}\t${names.join(' ')}`;
        });
    },
    async stop() {
      stopped = true;
      serviceFeed.close();
      await serviceFeed.done;
      for (const p of [...services.values()]) close(p);
      for (const s of sockets) s.destroy();
    },
  };
}
