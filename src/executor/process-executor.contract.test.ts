// The executor contract (executor.contract.ts) on the process backend: real,
// unsandboxed Node workers (the sandboxed ones are covered by the system tests).
import { runExecutorContract } from './executor.contract.ts';
import { unixRequest } from './process/unix-http.ts';
import { startTestProcessExecutor } from './process-testing.ts';

runExecutorContract('process', {
  async setup(queue) {
    const { store, executor, stop } = await startTestProcessExecutor(queue);
    return { store, executor, environment: 'node', call: (lease, p) => unixRequest(lease.socketPath as string, 'GET', p, { timeoutMs: 20_000 }), stop };
  },
});
