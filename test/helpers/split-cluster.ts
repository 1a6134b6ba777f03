// Kubernetes mode split into its roles, as the chart runs it, on a real
// control plane with the node agent (kube-cluster.ts): N executor replicas
// (one leads through the Lease flint-executor and serves the executor
// service), one controller, and M routers on chosen (or free) ports. Each is
// a `flint server` child process of its own; function pods run under the
// node agent in this process. For system tests (test/scale-out.test.ts) and
// the scale-out benchmark (bench/scale-out.ts).
import { freePort } from '../../scripts/local-brokers.ts';
import { startTestCluster, type TestCluster } from './kube-cluster.ts';
import { startServer, type TestServer } from './server.ts';

/** The fetcher image of the tests: the node agent runs this checkout's bin/flint.js for it. */
export const TEST_FETCHER = 'ghcr.io/flint/flint:test';

export interface SplitClusterOptions {
  /** Executor replicas (default 1). */
  executors?: number;
  /** Routers on these ports; free ones when not given. */
  routerPorts?: number[];
  /** How many routers when routerPorts is not given (default 2). */
  routers?: number;
  /** A cluster started by the caller (kept running by stop()); one of this helper's own otherwise. */
  cluster?: TestCluster;
  /** `--set` values every role gets, after the cluster's. */
  sets?: string[];
  /** The control plane's and node agent's output, line by line. */
  log?: (line: string) => void;
}

export interface SplitCluster {
  cluster: TestCluster;
  controller: TestServer;
  /** The executor replicas started so far; the caller may replace those it kills. */
  executors: TestServer[];
  routers: TestServer[];
  routerUrls: string[];
  /** The `--set` values every role gets (the cluster's and the caller's); add `role=...` for another process. */
  sets(): string[];
  /** One more executor replica (a standby while another leads). */
  startExecutor(): Promise<TestServer>;
  /** The executor replica that leads now (its health says so), among `among` (default: every one started). */
  leaderOf(among?: TestServer[]): Promise<TestServer | undefined>;
  /** The last lines of every process's output, for a failing assertion. */
  diagnostics(lines?: number): string;
  /** Stops routers, controller and executors, then the cluster if this helper started it. */
  stop(): Promise<void>;
}

export async function startSplitCluster(o: SplitClusterOptions = {}): Promise<SplitCluster> {
  const cluster = o.cluster ?? (await startTestCluster({ log: o.log }));
  const ports = o.routerPorts ?? (await Promise.all(Array.from({ length: o.routers ?? 2 }, () => freePort())));
  const routerUrls = ports.map((p) => `http://127.0.0.1:${p}`);
  const sets = () => [...cluster.sets(TEST_FETCHER), ...(o.sets ?? [])];
  const executors: TestServer[] = [];
  const routers: TestServer[] = [];
  let controller: TestServer | undefined;
  // Controller and executors reach the routers through kubernetes.routerUrl (the routers' Service in a cluster).
  const startExecutor = async () => {
    const e = await startServer({ sets: [...sets(), 'role=executor', 'executor.port=0', `kubernetes.routerUrl=${routerUrls[0]}`], expect: ['executor'] });
    executors.push(e);
    return e;
  };
  const stopAll = async () => {
    for (const s of [...routers, controller, ...executors]) await s?.stop().catch(() => {});
    if (!o.cluster) await cluster.stop();
  };
  // Every start settles before a failure is thrown, and each server is tracked as it comes up: one that failed must
  // not leave the others running (a test file whose servers outlive it never exits).
  const allStarted = async (starts: Promise<unknown>[]) => {
    const failed = (await Promise.allSettled(starts)).find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  };
  try {
    await allStarted(Array.from({ length: o.executors ?? 1 }, () => startExecutor()));
    controller = await startServer({ sets: [...sets(), 'role=controller', `kubernetes.routerUrl=${routerUrls[0]}`], expect: ['controller'] });
    await allStarted(ports.map(async (p) => routers.push(await startServer({ sets: [...sets(), 'role=router', `router.port=${p}`], expect: ['router'] }))));
  } catch (err) {
    await stopAll();
    throw err;
  }
  const started = controller;
  return {
    cluster,
    controller: started,
    executors,
    routers,
    routerUrls,
    sets,
    startExecutor,
    async leaderOf(among = executors) {
      for (const e of among) {
        if (e.child.exitCode !== null || e.child.signalCode !== null) continue;
        const health = await fetch(`${e.executorUrl}/healthz`)
          .then((r) => r.json() as Promise<{ leader: boolean }>)
          .catch(() => undefined);
        if (health?.leader) return e;
      }
      return undefined;
    },
    diagnostics: (lines = 25) =>
      [...executors, ...routers, started]
        .map((s) => `--- ${s.executorUrl ?? s.routerUrl ?? s.controllerUrl} ---\n${s.output().split('\n').slice(-lines).join('\n')}`)
        .join('\n'),
    stop: stopAll,
  };
}
