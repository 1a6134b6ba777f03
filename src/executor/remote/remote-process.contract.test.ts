// The executor contract (executor.contract.ts) through the executor service:
// a RemoteExecutor (the routers' executor in kubernetes mode), its grant
// cache and the HTTP protocol, in front of the process backend's real
// workers. Whatever the contract asks of an executor, a router asking the
// leader over the network gets too.
import { pino } from 'pino';
import { runExecutorContract } from '../executor.contract.ts';
import { unixRequest } from '../process/unix-http.ts';
import { startTestProcessExecutor } from '../process-testing.ts';
import { ExecutorService } from './executor-service.ts';
import { RemoteExecutor } from './remote-executor.ts';
import { ExecutorServiceClient } from './service-client.ts';

runExecutorContract('remote (executor service over the process backend)', {
  async setup(queue) {
    const local = await startTestProcessExecutor(queue);
    const logger = pino({ level: 'silent' });
    const service = new ExecutorService({ host: '127.0.0.1', port: 0, identity: 'leader-a', token: 'test-token', leader: () => local.executor, logger });
    const url = await service.start();
    const executor = new RemoteExecutor({ client: new ExecutorServiceClient({ leaderUrl: () => url, token: 'test-token', reachMs: 5000 }), logger });
    await executor.start();
    return {
      store: local.store,
      executor,
      environment: 'node',
      call: (lease, p) => unixRequest(lease.socketPath as string, 'GET', p, { timeoutMs: 20_000 }),
      async stop() {
        await executor.stop();
        await service.stop();
        await local.stop();
      },
    };
  },
});
