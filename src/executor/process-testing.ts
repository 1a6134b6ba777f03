// A process executor for tests: real, unsandboxed Node workers over a fresh
// SQLite store with one environment `node`, and a stop that removes it all.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import type { Environment } from '../api/kinds.ts';
import { LocalArchiveStore } from '../archive/index.ts';
import { dataLayout } from '../config/layout.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import type { InstanceBudget } from './instance-budget.ts';
import { createProcessExecutor, type ProcessExecutor } from './process-executor.ts';

export async function startTestProcessExecutor(
  queue?: { maxLength: number; timeoutMs: number },
  budget?: InstanceBudget,
  /** Off unless given (as the executor's own default): the other tests count warm workers, and a pool growing ahead for new functions would change their counts. */
  firstCallWindowSeconds = 0,
): Promise<{ store: Store; executor: ProcessExecutor; stop(): Promise<void> }> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-pe-test-'));
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
    budget,
    firstCallWindowSeconds,
  });
  await executor.start();
  return {
    store,
    executor,
    async stop() {
      await executor.stop();
      await store.close();
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
