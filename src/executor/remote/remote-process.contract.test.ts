// The executor contract (executor.contract.ts) through the executor service:
// a RemoteExecutor (the routers' executor in kubernetes mode), its grant
// cache and the HTTP protocol, in front of the process backend's real
// workers. Whatever the contract asks of an executor, a router asking the
// leader over the network gets too.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import type { Environment } from '../../api/kinds.ts';
import { LocalArchiveStore } from '../../archive/index.ts';
import { dataLayout } from '../../config/layout.ts';
import { openSqliteStore } from '../../store/sqlite.ts';
import { runExecutorContract } from '../executor.contract.ts';
import { unixRequest } from '../process/unix-http.ts';
import { createProcessExecutor } from '../process-executor.ts';
import { ExecutorService } from './executor-service.ts';
import { RemoteExecutor } from './remote-executor.ts';
import { ExecutorServiceClient } from './service-client.ts';

runExecutorContract('remote (executor service over the process backend)', {
  async setup(queue) {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-remote-contract-'));
    const layout = dataLayout(root);
    const store = openSqliteStore(layout.db);
    await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'node', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 1, terminationGracePeriod: 5 } } as Environment);
    const logger = pino({ level: 'silent' });
    const local = createProcessExecutor({
      store,
      layout,
      logger,
      sandbox: 'none',
      memoryMB: 128,
      poolSize: 1,
      reapIntervalMs: 60_000,
      archives: new LocalArchiveStore(layout.archives),
      queue,
    });
    await local.start();
    const service = new ExecutorService({ host: '127.0.0.1', port: 0, identity: 'leader-a', token: 'test-token', leader: () => local, logger });
    const url = await service.start();
    const executor = new RemoteExecutor({ client: new ExecutorServiceClient({ leaderUrl: () => url, token: 'test-token', reachMs: 5000 }), logger });
    await executor.start();
    return {
      store,
      executor,
      environment: 'node',
      call: (lease, p) => unixRequest(lease.socketPath as string, 'GET', p, { timeoutMs: 20_000 }),
      async stop() {
        await executor.stop();
        await service.stop();
        await local.stop();
        await store.close();
        fs.rmSync(root, { recursive: true, force: true });
      },
    };
  },
});
