// Builds the configured provider from install values, for `flint server`.
import type { ConnectionDrop } from '../limits/connection-admission.ts';
import type { NodeServerLimits } from '../limits/node-server.ts';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Values } from '../config/values.ts';
import { createBuiltinGateway } from './builtin.ts';
import { createKubeClient, inClusterKubeClientOptions, type KubeClient } from '../store/kube-client.ts';
import { createKubernetesIngressProvider } from './kubernetes.ts';
import { createNginxProvider } from './nginx.ts';
import type { IngressProvider } from './provider.ts';

export { createIngressController, type IngressController } from './controller.ts';
export type { IngressProvider, IngressSpec } from './provider.ts';

export interface IngressFromValuesOptions {
  values: Pick<Values, 'ingress' | 'dataDir'>;
  /** Where the router serves routes, as reachable from the gateway or nginx. */
  routerUrl: string;
  logger?: Logger;
  /** Kubernetes provider: the API client; default the in-cluster service account. */
  kubeClient?: KubeClient;
  /** The builtin gateway's connection caps and timeouts (nginx keeps its own). */
  limits?: NodeServerLimits;
  onDrop?: (listener: string) => (why: ConnectionDrop) => void;
}

/** The provider `ingress.provider` names, or undefined when `ingress.enabled` is false. Not started. */
export function createIngressProvider(o: IngressFromValuesOptions): IngressProvider | undefined {
  const v = o.values.ingress;
  if (!v.enabled) return undefined;
  const logger = o.logger;
  switch (v.provider) {
    case 'builtin':
      return createBuiltinGateway({ routerUrl: o.routerUrl, host: v.host, port: v.port, httpsPort: v.httpsPort, acceptSockets: v.acceptSockets, logger, limits: o.limits, onDrop: o.onDrop });
    case 'nginx':
      return createNginxProvider({
        workDir: path.join(path.resolve(o.values.dataDir), 'nginx'),
        routerUrl: o.routerUrl,
        host: v.host,
        port: v.port,
        httpsPort: v.httpsPort,
        logger,
      });
    case 'kubernetes':
      return createKubernetesIngressProvider({ client: o.kubeClient ?? createKubeClient(inClusterKubeClientOptions()), logger });
  }
}

/** The URLs a local provider listens on, for the start-up lines; none for kubernetes. */
export function ingressUrls(p: IngressProvider): { url?: string; httpsUrl?: string } {
  const local = p as { url?: string; httpsUrl?: string };
  return p.kind === 'kubernetes' ? {} : { url: local.url, httpsUrl: local.httpsUrl };
}
