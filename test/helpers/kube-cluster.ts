// The ground kubernetes-mode system tests stand on: a real control plane
// (scripts/kube/control-plane.ts) with one node agent, the chart's CRDs,
// namespaces and RBAC as helm renders them, and a token of the chart's
// ServiceAccount for `flint server` to run as, so a permission the chart
// forgot is a 403 here as it would be in a cluster. The API server's audit
// log is read back to check what Flint asked of it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ensureHelm } from '../../scripts/helm.ts';
import { type ControlPlane, startControlPlane } from '../../scripts/kube/control-plane.ts';
import { type NodeAgent, startNodeAgent } from '../../scripts/kube/node-agent.ts';
import { REPO } from './server.ts';

export const CHART = path.join(REPO, 'charts', 'flint');
/** The release namespace: the router Secret and Ingresses live here. */
export const FLINT_NAMESPACE = 'flint';
export const FUNCTION_NAMESPACE = 'flint-function';
export const SERVICE_ACCOUNT_USER = `system:serviceaccount:${FLINT_NAMESPACE}:flint`;
/** The kinds of the chart applied for a control plane that runs outside the cluster (the test's own `flint server`). */
const ACCESS_KINDS = new Set(['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);

export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: { resource?: string; namespace?: string; name?: string; subresource?: string; apiGroup?: string };
  responseStatus?: { code?: number; message?: string };
  annotations?: Record<string, string>;
  requestReceivedTimestamp: string;
  stage: string;
}

export interface TestCluster {
  controlPlane: ControlPlane;
  agent: NodeAgent;
  /** A file holding the chart ServiceAccount's token. */
  tokenFile: string;
  /** `flint server --set` values for kubernetes mode against this cluster, as the chart's ServiceAccount. */
  sets(fetcherImage: string): string[];
  /** Every answer the API server gave the chart's ServiceAccount (what Flint asked), in order. */
  flintRequests(): AuditEvent[];
  stop(): Promise<void>;
}

/** The chart as helm renders it for `sets`. */
export function renderChart(sets: string[] = []): any[] {
  const out = execFileSync(ensureHelm(), ['template', 'flint', CHART, '--namespace', FLINT_NAMESPACE, ...sets.flatMap((s) => ['--set', s])], { encoding: 'utf8' });
  return parseAllDocuments(out)
    .map((d) => d.toJS())
    .filter(Boolean);
}

export function readAudit(file: string): AuditEvent[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent)
    .filter((e) => e.stage === 'ResponseComplete' || e.stage === 'Panic');
}

export async function startTestCluster(o: { log?: (line: string) => void; chartSets?: string[] } = {}): Promise<TestCluster> {
  const controlPlane = await startControlPlane({ log: o.log });
  let agent: NodeAgent | undefined;
  try {
    agent = await startNodeAgent({ controlPlane, log: o.log });
    await controlPlane.kubectl(['apply', '-f', path.join(CHART, 'crds')]);
    await controlPlane.kubectl(['create', 'namespace', FLINT_NAMESPACE]);
    const access = renderChart(o.chartSets).filter((d) => ACCESS_KINDS.has(d.kind));
    await controlPlane.kubectl(['apply', '-f', '-'], { input: access.map((d) => JSON.stringify(d)).join('\n') });
    await controlPlane.kubectl(['wait', '--for=condition=established', '--timeout=60s', 'crd', '--all']);
    const token = (await controlPlane.kubectl(['-n', FLINT_NAMESPACE, 'create', 'token', 'flint', '--duration=6h'])).trim();
    const tokenFile = path.join(controlPlane.dir, 'flint-sa.token');
    fs.writeFileSync(tokenFile, token, { mode: 0o600 });
    const started = agent;
    return {
      controlPlane,
      agent: started,
      tokenFile,
      sets: (fetcherImage) => [
        'mode=kubernetes',
        `kubernetes.apiServer=${controlPlane.url}`,
        `kubernetes.tokenFile=${tokenFile}`,
        `kubernetes.caFile=${controlPlane.caFile}`,
        `kubernetes.functionNamespace=${FUNCTION_NAMESPACE}`,
        `kubernetes.fetcherImage=${fetcherImage}`,
      ],
      flintRequests: () => readAudit(controlPlane.auditLog).filter((e) => e.user.username === SERVICE_ACCOUNT_USER),
      async stop() {
        await started.stop();
        await controlPlane.stop();
      },
    };
  } catch (err) {
    await agent?.stop();
    await controlPlane.stop();
    throw err;
  }
}
