// The executor contract (src/executor/executor.contract.ts) on the kubernetes
// backend, on a real control plane with the node agent: instances are pool
// pods claimed and specialized through their fetchers, Flint authenticated
// as the chart's ServiceAccount.
import { pino } from 'pino';
import type { Environment } from '../src/api/kinds.ts';
import { runExecutorContract } from '../src/executor/executor.contract.ts';
import { createKubeExecutor } from '../src/executor/kubernetes/kube-executor.ts';
import { sandboxAvailable } from '../src/sandbox/bwrap.ts';
import { createKubeClient } from '../src/store/kube-client.ts';
import { openKubeStore } from '../src/store/kubernetes.ts';
import fs from 'node:fs';
import { FUNCTION_NAMESPACE, startTestCluster } from './helpers/kube-cluster.ts';

if (await sandboxAvailable()) {
  runExecutorContract('kubernetes (real control plane)', {
    timeoutMs: 90_000,
    async setup(queue) {
      const cluster = await startTestCluster();
      const client = createKubeClient({ baseUrl: cluster.controlPlane.url, ca: cluster.controlPlane.pki.ca, token: fs.readFileSync(cluster.tokenFile, 'utf8').trim() });
      const store = await openKubeStore({ client });
      await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'node', namespace: 'default' }, spec: { runtime: { image: 'ghcr.io/fission/node-env:latest' }, poolsize: 3 } } as Environment);
      const executor = createKubeExecutor({
        store,
        client,
        logger: pino({ level: 'silent' }),
        functionNamespace: FUNCTION_NAMESPACE,
        fetcherImage: 'ghcr.io/flint/flint:test',
        // Packages here are literal: their code travels in the specialize request, nothing is downloaded.
        controllerUrl: 'http://127.0.0.1:1',
        reapIntervalMs: 1000,
        queue,
      });
      await executor.start();
      return {
        store,
        executor,
        environment: 'node',
        async call(lease, p) {
          const res = await fetch(`http://${lease.address}${p}`, { signal: AbortSignal.timeout(20_000) });
          return { status: res.status, text: await res.text() };
        },
        async stop() {
          await executor.stop();
          await store.close();
          await cluster.stop();
        },
      };
    },
  });
}
