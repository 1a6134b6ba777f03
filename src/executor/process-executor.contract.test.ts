// The executor contract (executor.contract.ts) on the process backend: real,
// unsandboxed Node workers (the sandboxed ones are covered by the system tests).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import type { Environment } from '../api/kinds.ts';
import { LocalArchiveStore } from '../archive/index.ts';
import { dataLayout } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import { runExecutorContract } from './executor.contract.ts';
import { unixRequest } from './process/unix-http.ts';
import { createProcessExecutor } from './process-executor.ts';

runExecutorContract('process', {
  async setup(queue) {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-pe-contract-'));
    const layout = dataLayout(root);
    const store = openSqliteStore(layout.db);
    await store.create<Environment>({ apiVersion: 'flint.dev/v1', kind: 'Environment', metadata: { name: 'node', namespace: 'default' }, spec: { runtime: { image: 'flint/node-env' }, poolsize: 1, terminationGracePeriod: 5 } } as Environment);
    const executor = createProcessExecutor({
      store,
      layout,
      logger: pino({ level: 'silent' }),
      sandbox: 'none',
      memoryMB: 128,
      poolSize: 1,
      reapIntervalMs: 60_000,
      archives: new LocalArchiveStore(layout.archives),
      queue,
    });
    await executor.start();
    return {
      store,
      executor,
      environment: 'node',
      call: (lease, p) => unixRequest(lease.socketPath as string, 'GET', p, { timeoutMs: 20_000 }),
      async stop() {
        await executor.stop();
        await store.close();
        fs.rmSync(root, { recursive: true, force: true });
      },
    };
  },
});
