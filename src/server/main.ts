// `flint server`: composes the components in one process. Local mode keeps
// resources in SQLite and runs functions as sandboxed processes; kubernetes
// mode keeps them as custom resources and runs functions in pods, with the
// same controller, router, build manager, trigger manager and ingress.
import fs from 'node:fs';
import { pino } from 'pino';
import { Gauge, Registry } from 'prom-client';
import { FlintError } from '../api/errors.ts';
import { SYSTEM_NAMESPACE } from '../api/meta.ts';
import { MQ_TYPES } from '../api/names.ts';
import { LocalArchiveStore } from '../archive/index.ts';
import { ensureAdminToken } from '../auth/admin-token.ts';
import { ARCHIVES_AUDIENCE } from '../auth/audiences.ts';
import { createControllerAuthCheck, FETCHER_SUBJECT } from '../auth/controller-auth.ts';
import { createRouterGuard } from '../auth/guard.ts';
import { ensureInternalToken, readInternalToken } from '../auth/internal-token.ts';
import { createTokenIssuer, type TokenIssuer } from '../auth/issuer.ts';
import { createLoginHandler } from '../auth/login.ts';
import { createMintedTokenSource } from '../auth/minted.ts';
import { ensureRouterSecret, type RouterCredentials, readRouterSecret } from '../auth/router-secret.ts';
import { createTokenService } from '../auth/tokens.ts';
import { BuildManager } from '../builder/manager.ts';
import { CanaryController } from '../canary/controller.ts';
import { type Counts, localCounters, scrapedCounters } from '../canary/counters.ts';
import { routerEndpoints, scrapeRouterMetrics } from '../canary/router-endpoints.ts';
import { dataLayout } from '../config/layout.ts';
import { loadValues, type Values, type ValuesSources } from '../config/values.ts';
import { createController } from '../controller/app.ts';
import { ArchiveGc } from '../controller/archive-gc.ts';
import type { ServerInfo } from '../controller/info.ts';
import { localLogSource } from '../controller/logs.ts';
import { MetricsSampler, type MetricsText } from '../controller/metrics-sampler.ts';
import { budgetLimits, InstanceBudget } from '../executor/instance-budget.ts';
import { createKubeExecutor, KubeExecutor } from '../executor/kubernetes/kube-executor.ts';
import { registerExecutorMetrics } from '../executor/metrics.ts';
import { createProcessExecutor, ProcessExecutor } from '../executor/process-executor.ts';
import { ExecutorService } from '../executor/remote/executor-service.ts';
import { RemoteExecutor } from '../executor/remote/remote-executor.ts';
import { ExecutorServiceClient } from '../executor/remote/service-client.ts';
import type { Executor } from '../executor/types.ts';
import { createIngressController, createIngressProvider, ingressUrls } from '../ingress/index.ts';
import { type Listener, listenerCaps, openFileLimit } from '../limits/fd-budget.ts';
import { closeGroup, listenServerGroup } from '../limits/listener-group.ts';
import { connectionDropCounter } from '../limits/metrics.ts';
import { limitNodeServer } from '../limits/node-server.ts';
import type { Connector } from '../mqtrigger/connector.ts';
import { KafkaConnector } from '../mqtrigger/kafka.ts';
import { createTriggerManager } from '../mqtrigger/manager.ts';
import { NatsConnector } from '../mqtrigger/nats.ts';
import { RabbitConnector } from '../mqtrigger/rabbitmq.ts';
import { TopicReadback } from '../mqtrigger/readback.ts';
import { RedisConnector } from '../mqtrigger/redis.ts';
import { connectorFor, SharedConnectors } from '../mqtrigger/trigger-connectors.ts';
import { jsonLines } from '../router/access-log.ts';
import { createRouter } from '../router/router.ts';
import { sandboxAvailable } from '../sandbox/bwrap.ts';
import { formatCpuList, parseCpuList, pinProcess, usableCpus } from '../sandbox/cpu-affinity.ts';
import { EgressNetworks } from '../sandbox/egress.ts';
import { openKubeStore } from '../store/kubernetes.ts';
import { followLeader } from '../store/leader-election.ts';
import { openSqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/store.ts';
import { createTimeTriggerScheduler } from '../timetrigger/scheduler.ts';
import type { Tracing } from '../tracing/index.ts';
import { makeDataDirPrivate, privateDatabaseFiles } from './data-dir.ts';
import { kubeClientFromValues } from './kube.ts';
import { ensureNamespaces } from './kube-namespaces.ts';
import { candidateIdentity, rolesOf, runElected, waitFor } from './roles.ts';
import { VERSION } from './version.ts';

export interface RunningServer {
  values: Values;
  controllerUrl: string;
  routerUrl: string;
  /** Kubernetes mode: serves on for router.drainSeconds while load balancers take this pod out of rotation (Router.leaveRotation). */
  leaveRotation(): Promise<void>;
  stop(): Promise<void>;
}

/** The install values section of each message-queue type's broker. */
const MQ_VALUES = { kafka: 'kafka', 'nats-jetstream': 'nats', rabbitmq: 'rabbitmq', redis: 'redis' } as const;

const hostForUrl = (host: string) => (host.includes(':') ? `[${host}]` : host);

function urlOf(address: string | { address: string; port: number } | null): string {
  if (!address || typeof address === 'string') return String(address);
  return `http://${hostForUrl(address.address)}:${address.port}`;
}

/**
 * `onFatal`: this replica lost its role's Lease while its singletons ran (kubernetes mode, an elected role); they may
 * now run beside the new leader's, so `flint server` exits and Kubernetes restarts it as a standby.
 */
export async function startServer(
  src: ValuesSources,
  out: (line: string) => void = console.log,
  onFatal: (why: string) => void = (why) => console.error(`fatal: ${why}`),
): Promise<RunningServer> {
  const values = await loadValues(src);
  const runs = rolesOf(values);
  // Workers and builds get the CPUs the server could use before it pins itself, unless told otherwise (cpu-affinity.ts).
  const workerCpus = values.executor.workerCpus !== '' ? values.executor.workerCpus : values.router.cpus !== '' ? formatCpuList(usableCpus()) : '';
  try {
    pinProcess(process.pid, values.router.cpus);
  } catch (err) {
    throw new FlintError('FLINT_ERR_CONFIG', `install value 'router.cpus' could not be applied: ${(err as Error).message}`, { field: 'router.cpus' });
  }
  const layout = dataLayout(values.dataDir);
  makeDataDirPrivate(layout, { createDatabase: values.mode !== 'kubernetes' });
  for (const dir of [layout.logs, layout.instances, layout.archives]) fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const logger = pino({ level: values.logLevel }, pino.destination(2));
  const kube =
    values.mode === 'kubernetes'
      ? kubeClientFromValues(values.kubernetes, {
          // An unknown field the server dropped is a setting that silently does nothing.
          onWarning: (warning, req) => logger.warn({ warning, method: req.method, path: req.path }, 'the Kubernetes API server warned about a request'),
        })
      : undefined;
  if (kube) {
    await ensureNamespaces(
      kube,
      [
        { name: SYSTEM_NAMESPACE, purpose: "Flint's own: the router Secret and the Ingresses" },
        {
          name: values.kubernetes.functionNamespace,
          purpose: 'kubernetes.functionNamespace: where function pods run',
          labels: values.enableIstio ? { 'istio-injection': 'enabled' } : undefined,
        },
      ],
      logger,
    );
  }
  const store: Store = kube
    ? await openKubeStore({
        client: kube,
        onError: (err, kind) => logger.warn({ err, kind }, 'following the Kubernetes API failed; retrying'),
        // A router reads routes and functions only; its ServiceAccount may follow nothing else (charts/flint/templates/rbac.yaml).
        follow: runs.role === 'router' ? ['Function', 'HTTPTrigger'] : undefined,
      })
    : openSqliteStore(layout.db);
  // SQLite made its WAL and SHM on open; they follow the database's mode, but a WAL left by an older server may not.
  if (!kube) privateDatabaseFiles(layout);
  const stops: Array<() => Promise<void>> = [async () => store.close()];
  const stop = async () => {
    for (const s of stops.reverse()) {
      try {
        await s();
      } catch (err) {
        logger.error({ err }, 'stopping a component failed');
      }
    }
  };

  try {
    if (values.executor.sandbox === 'bubblewrap' && !(await sandboxAvailable()) && kube) {
      // Functions run in pods here; only builds use the sandbox, and they fail one by one with bubblewrap's own message.
      logger.warn('bubblewrap is not usable in this container: builds of source packages will fail (use deployment archives, or set executor.sandbox=none to build unsandboxed)');
    } else if (values.executor.sandbox === 'bubblewrap' && !(await sandboxAvailable())) {
      throw new FlintError(
        'FLINT_ERR_CONFIG',
        "bubblewrap is not usable here, so functions cannot be sandboxed: install it (apt-get install bubblewrap) or start with --set executor.sandbox=none to run functions unsandboxed",
        { field: 'executor.sandbox' },
      );
    }
    // The control plane's /metrics; the connection caps of every listener count there too.
    const metrics = new Registry();
    const fdLimit = openFileLimit();
    const dropped = connectionDropCounter(metrics);
    const limitsOf = (listener: Listener, v: Values['controller']) => ({
      ...listenerCaps(listener, v, fdLimit),
      headersTimeoutMs: v.headersTimeoutSeconds * 1000,
      keepAliveTimeoutMs: v.keepAliveTimeoutSeconds * 1000,
    });
    if (values.executor.sandbox === 'none') logger.warn('executor.sandbox=none: functions run unsandboxed, with this user\'s rights');
    // Sandboxes with external network (functions of such environments, builds) get namespaces of their own from it.
    // Constructed in every mode, so a bad executor.egressSubnet stops every start.
    const egress = new EgressNetworks({ subnet: values.executor.egressSubnet, logger: logger.child({ component: 'egress' }) });
    if (values.executor.sandbox === 'bubblewrap') {
      await egress.start({ functions: !kube });
      // Runs after the executor and the builder stopped (stops run in reverse), when no sandbox needs them.
      stops.push(() => egress.stop());
    }
    const sandboxEgress = values.executor.sandbox === 'bubblewrap' ? egress : undefined;
    // Tracing: loaded only when an OTLP endpoint is set, so with it off no tracing code runs. Its entry stops after the
    // router's and the trigger manager's (stops run in reverse), so their last spans are sent.
    const identity = candidateIdentity();
    let tracing: Tracing | undefined;
    if (values.tracing.otlpEndpoint !== '') {
      const { startTracing } = await import('../tracing/index.ts');
      const traceLog = logger.child({ component: 'tracing' });
      const started = startTracing(values.tracing, { version: VERSION, instanceId: identity, role: runs.role, warn: (message) => traceLog.warn(message) });
      tracing = started;
      started.register(metrics);
      stops.push(() => started.shutdown());
    }
    // Authentication: everything is built only when it is on.
    const authValues = values.authentication;
    let auth:
      | {
          guard: ReturnType<typeof createRouterGuard>;
          /** Only where the control plane's API runs (the admin token lives in its data directory). */
          controllerCheck: ReturnType<typeof createControllerAuthCheck> | undefined;
          issueToken: TokenIssuer;
          mint: () => string;
          mintTimer: () => string;
          mintFetcher: () => string;
          mintCanary: () => string;
          mintDashboard: () => string;
        }
      | undefined;
    if (authValues.enabled) {
      const authLog = logger.child({ component: 'auth' });
      // The controller makes the router secret; the other roles wait for it rather than race it.
      const creds: RouterCredentials = runs.controller
        ? await ensureRouterSecret(store, authValues, layout, { logger: authLog })
        : await waitFor(`the router secret ${SYSTEM_NAMESPACE}/router (the controller makes it)`, () => readRouterSecret(store), 120_000, (what) => logger.info(`waiting for ${what}`));
      const tokens = createTokenService({ signingKey: creds.signingKey, issuer: authValues.jwtIssuer, expirySeconds: authValues.jwtExpiryTime });
      auth = {
        guard: createRouterGuard({ tokens, authUriPath: authValues.authUriPath, login: createLoginHandler({ tokens, credentials: creds, logger: authLog }) }),
        controllerCheck: runs.controller ? createControllerAuthCheck({ adminToken: ensureAdminToken(layout), tokens, credentials: creds }) : undefined,
        issueToken: createTokenIssuer(tokens, creds.username),
        mint: createMintedTokenSource({ tokens, subject: 'flint:mqtrigger' }),
        mintTimer: createMintedTokenSource({ tokens, subject: 'flint:timetrigger' }),
        // Pool pods' fetchers download archives from the control plane with it (kubernetes mode); the router refuses it.
        mintFetcher: createMintedTokenSource({ tokens, subject: FETCHER_SUBJECT, audience: ARCHIVES_AUDIENCE }),
        // The canary controller reads the routers' /metrics with it (kubernetes mode, role executor).
        mintCanary: createMintedTokenSource({ tokens, subject: 'flint:canary' }),
        // The dashboard's charts read the routers' /metrics with it (kubernetes mode, role controller).
        mintDashboard: createMintedTokenSource({ tokens, subject: 'flint:dashboard' }),
      };
    }
    const archives = new LocalArchiveStore(layout.archives);
    const budget = kube ? undefined : new InstanceBudget(budgetLimits(values.executor, values.executor.memoryMB));
    const MIB = 1024 * 1024;
    const maxUnpackedBytes = values.archives.maxUnpackedMB * MIB;
    let controllerUrl = '';
    let routerUrl = values.kubernetes.routerUrl;
    // The role's singletons: started at once, or (several replicas) by whichever holds the role's Lease.
    const singletons: Array<{ start(): Promise<void> }> = [];
    // Kubernetes mode's executor in its own process (role executor): serves the routers (executor-service.ts).
    let executorService: ExecutorService | undefined;
    let local: ProcessExecutor | KubeExecutor | undefined;
    let startExecutor = () => Promise.resolve();
    if (runs.executor) {
      local = kube
        ? createKubeExecutor({
            store,
            client: kube,
            logger: logger.child({ component: 'executor' }),
            functionNamespace: values.kubernetes.functionNamespace,
            fetcherImage: values.kubernetes.fetcherImage,
            controllerUrl: () => values.kubernetes.controllerUrl || controllerUrl,
            archiveAuthorization: auth ? () => `Bearer ${auth.mintFetcher()}` : undefined,
            enableIstio: values.enableIstio,
            poolSize: values.executor.poolSize,
            firstCallWindowSeconds: values.executor.firstCallWindowSeconds,
            reapIntervalMs: values.executor.reapIntervalSeconds * 1000,
            layout,
            queue: { maxLength: values.executor.maxQueueLength, timeoutMs: values.executor.queueTimeoutSeconds * 1000 },
          })
        : createProcessExecutor({
            store,
            layout,
            archives,
            maxUnpackedBytes,
            logger: logger.child({ component: 'executor' }),
            sandbox: values.executor.sandbox,
            egress: sandboxEgress,
            memoryMB: values.executor.memoryMB,
            cpus: workerCpus,
            poolSize: values.executor.poolSize,
            // Derived from the workers' CPUs, not from this process's: it may have just been pinned to fewer.
            concurrentStarts: values.executor.concurrentStarts || (workerCpus !== '' ? 2 * parseCpuList(workerCpus).length : undefined),
            firstCallWindowSeconds: values.executor.firstCallWindowSeconds,
            reapIntervalMs: values.executor.reapIntervalSeconds * 1000,
            budget,
            queue: { maxLength: values.executor.maxQueueLength, timeoutMs: values.executor.queueTimeoutSeconds * 1000 },
          });
      const started = local;
      let serving = false;
      startExecutor = async () => {
        if (serving) return;
        await started.start();
        serving = true;
      };
      singletons.push({ start: startExecutor });
      stops.push(() => started.stop());
      if (started instanceof ProcessExecutor) registerExecutorMetrics(metrics, started, budget);
      if (runs.elected && started instanceof KubeExecutor) {
        const service = new ExecutorService({
          host: values.executor.host,
          port: values.executor.port,
          identity,
          token: await ensureInternalToken(store),
          leader: () => (serving ? started : undefined),
          logger: logger.child({ component: 'executor-service' }),
          // The controller serves the logs this executor writes (roles apart, it has none of its own).
          functionLogs: localLogSource(layout),
        });
        executorService = service;
        await service.start();
        stops.push(() => service.stop());
        out(`executor listening on http://${hostForUrl(values.executor.host)}:${service.port}`);
      }
    }
    // The routers' executor when it runs elsewhere (role router, or the controller's instance reports).
    let leaderClient: ExecutorServiceClient | undefined;
    if (kube && !runs.executor) {
      const leader = followLeader(kube, SYSTEM_NAMESPACE, 'executor', (err) => logger.warn({ err }, 'following the executor Lease failed; retrying'));
      await leader.ready;
      stops.push(() => leader.stop());
      const token = await waitFor(`the Secret ${SYSTEM_NAMESPACE}/executor (the executor makes it)`, () => readInternalToken(store), 120_000, (what) => logger.info(`waiting for ${what}`));
      leaderClient = new ExecutorServiceClient({
        leaderUrl: () => leader.current()?.url,
        token,
        // Long enough for a standby to take over from a leader that died (the Lease's duration) and start.
        reachMs: (values.kubernetes.leaderElection.leaseDurationSeconds + values.executor.queueTimeoutSeconds) * 1000,
      });
    }
    if (runs.controller) {
      const builds = new BuildManager({
        store,
        archives,
        buildsDir: layout.builds,
        cacheDir: layout.buildCache,
        sandbox: values.executor.sandbox,
        egress: sandboxEgress,
        timeoutSeconds: values.builder.timeoutSeconds,
        memoryMB: values.builder.memoryMB,
        cpus: workerCpus,
        concurrency: values.builder.concurrency,
        maxUnpackedBytes,
        logger: logger.child({ component: 'builder' }),
      });
      singletons.push({ start: () => builds.start() });
      stops.push(() => builds.stop());
      const gc = new ArchiveGc({ store, archives, graceMs: values.archives.gcGraceMinutes * 60_000, intervalMs: 60_000, logger: logger.child({ component: 'archives' }) });
      singletons.push({ start: async () => gc.start() });
      stops.push(async () => gc.stop());
    }
    let leaveRotation = () => Promise.resolve();
    let stopRouter: (() => Promise<void>) | undefined;
    /** This process's router's requests and 5xx answers per function, for the canary controller. */
    let routerCounts: (() => ReadonlyMap<string, Counts>) | undefined;
    /** This process's router's Prometheus text, for the dashboard's charts. */
    let routerMetricsText: (() => Promise<string>) | undefined;
    if (runs.router) {
      let executor: Executor;
      if (local) {
        // One process: the executor is started before the router takes a request.
        await startExecutor();
        executor = local;
      } else {
        const remote = new RemoteExecutor({ client: leaderClient as ExecutorServiceClient, logger: logger.child({ component: 'executor-client' }) });
        await remote.start();
        stops.push(() => remote.stop());
        executor = remote;
      }
      // Written as the event loop allows: the hot path pays for one string per request.
      const accessOut = values.router.accessLog ? pino.destination({ dest: 1, sync: false }) : undefined;
      if (accessOut !== undefined) stops.push(async () => accessOut.flushSync());
      const router = createRouter({
        store,
        executor,
        logger: logger.child({ component: 'router' }),
        host: values.router.host,
        port: values.router.port,
        beforeRoute: auth?.guard,
        connections: { ...limitsOf('router', values.router), acceptSockets: values.router.acceptSockets, onDrop: dropped('router') },
        // With authentication off the header is not a Flint credential: a function may do its own auth with it.
        forwardAuthorization: auth === undefined || values.router.forwardAuthorization,
        accessLog: accessOut === undefined ? undefined : jsonLines(accessOut),
        tracer: tracing?.tracer,
      });
      tracing?.register(router.metrics.registry);
      routerUrl = (await router.start()).url;
      routerCounts = () => router.metrics.functionCounts();
      routerMetricsText = () => router.metrics.registry.metrics();
      // The instances stop while upgraded connections still carry bytes, so WebSockets get the runtime's 1001 rather than a cut.
      // The executor's own entry, earlier in the list, then finds it stopped.
      const stopRouterNow = () => router.stop(() => executor.stop());
      stopRouter = stopRouterNow;
      stops.push(stopRouterNow);
      out(`router listening on ${routerUrl}`);
      // Local mode has nothing routing around it: it stops at once.
      if (kube) leaveRotation = () => router.leaveRotation(values.router.drainSeconds * 1000);
    }
    let ingressUrl: string | undefined;
    let announceIngress = () => {};
    if (runs.executor) {
      const ingressProvider = createIngressProvider({
        values,
        routerUrl,
        logger: logger.child({ component: 'ingress' }),
        kubeClient: kube,
        limits: limitsOf('ingress', values.ingress),
        onDrop: dropped,
      });
      if (ingressProvider) {
        // The builtin gateway swaps a table in memory: apply at once, so a route is
        // exposed by the time the CLI returns. nginx reloads and kubernetes API
        // calls are worth coalescing over a burst of changes.
        const debounceMs = ingressProvider.kind === 'builtin' ? 0 : 50;
        const ingress = createIngressController({ store, provider: ingressProvider, debounceMs, logger: logger.child({ component: 'ingress' }) });
        singletons.push({ start: () => ingress.start() });
        // The router stops behind the ingress while the ingress's own tunnels are still open, so a WebSocket that came
        // through it gets the 1001 too. The router's own entry, earlier in the list, then finds it stopped.
        stops.push(() => ingress.stop(stopRouter ?? (() => Promise.resolve())));
        // Its ports are known once it started (port 0: a free one), with the singletons below.
        announceIngress = () => {
          const urls = ingressUrls(ingressProvider);
          ingressUrl = urls.url;
          if (urls.url) out(`ingress listening on ${urls.url}`);
          if (urls.httpsUrl) out(`ingress-https listening on ${urls.httpsUrl}`);
        };
      }
    }
    // Message queues: one connector per configured broker kind.
    const kafkaBrokers = values.kafka.brokers.split(',').map((b) => b.trim()).filter(Boolean);
    const kafka = values.kafka.enabled && (runs.executor || runs.controller) ? new KafkaConnector({ brokers: kafkaBrokers, clientId: 'flint' }) : undefined;
    if (kafka) stops.push(() => kafka.close());
    let triggers: ReturnType<typeof createTriggerManager> | undefined;
    if (runs.executor) {
      // Triggers whose metadata names their own server, or whose secret holds credentials.
      const triggerConnectors = new SharedConnectors();
      stops.push(() => triggerConnectors.close());
      const list = (v: string) => v.split(',').map((s) => s.trim()).filter(Boolean);
      const connectors: Partial<Record<string, Connector>> = {
        kafka,
        'nats-jetstream': values.nats.enabled ? new NatsConnector({ servers: list(values.nats.servers) }) : undefined,
        rabbitmq: values.rabbitmq.enabled ? new RabbitConnector({ url: values.rabbitmq.url }) : undefined,
        redis: values.redis.enabled ? new RedisConnector({ url: values.redis.url }) : undefined,
      };
      for (const [type, c] of Object.entries(connectors)) if (c && type !== 'kafka') stops.push(() => c.close());
      const manager = createTriggerManager({
        store,
        logger: logger.child({ component: 'mqtrigger' }),
        connector: (t) =>
          connectorFor(t, {
            install: connectors,
            installKafkaBrokers: kafkaBrokers,
            shared: triggerConnectors,
            secret: (ns, name) => store.get('Secret', ns, name),
            makeKafka: (brokers, auth) => new KafkaConnector({ brokers, auth, clientId: 'flint' }),
            makeRabbit: (url, tls) => new RabbitConnector({ url, tls }),
            makeRedis: (url, tls) => new RedisConnector({ url, tls }),
            makeNats: ({ servers, auth, tls }) => new NatsConnector({ servers, ...auth, tls }),
          }),
        routerUrl: () => routerUrl,
        token: auth?.mint,
        tracer: tracing?.tracer,
      });
      triggers = manager;
      singletons.push({ start: () => manager.start() });
      stops.push(() => manager.stop());
    }
    if (runs.executor) {
      // Time triggers: a singleton like the trigger manager, so one process fires each due time.
      const executor = local;
      const timers = createTimeTriggerScheduler({
        store,
        logger: logger.child({ component: 'timetrigger' }),
        routerUrl: () => routerUrl,
        token: auth?.mintTimer,
        functionLog: (ns, name, line) => executor?.writeFunctionLog(ns, name, line) ?? false,
      });
      singletons.push({ start: () => timers.start() });
      stops.push(() => timers.stop());
    }
    if (runs.executor) {
      // Canary configs, beside the trigger manager (one leader). The router in this process has every count (local mode,
      // role all); role executor reads the /metrics of every pod behind the router Service (docs/canary.md).
      const counts = routerCounts;
      const canaries = new CanaryController({
        store,
        counters: counts
          ? localCounters(counts)
          : scrapedCounters({
              routers: async () => (kube ? routerEndpoints(kube, SYSTEM_NAMESPACE) : [routerUrl]),
              token: auth?.mintCanary,
              onError: (url, err) => logger.warn({ err, router: url }, "reading a router's counters for the canaries failed"),
            }),
        logger: logger.child({ component: 'canary' }),
      });
      singletons.push({ start: () => canaries.start() });
      stops.push(() => canaries.stop());
    }
    // Run now, or once this replica leads its role.
    if (runs.elected && kube) {
      const advertised = executorService ? `http://${hostForUrl(values.executor.advertiseHost || values.executor.host)}:${executorService.port}` : undefined;
      const elected = runElected({
        client: kube,
        namespace: SYSTEM_NAMESPACE,
        role: runs.role,
        identity,
        singletons,
        values: values.kubernetes.leaderElection,
        leaderUrl: advertised,
        logger: logger.child({ component: 'leader-election' }),
        onLost: onFatal,
      });
      // Stops run in reverse: the singletons stop first, then the Lease is released for a standby (the store's close stays first).
      stops.splice(1, 0, () => elected.stop());
    } else {
      for (const s of singletons) await s.start();
      announceIngress();
    }
    if (runs.controller) {
      const readback = kafka ? new TopicReadback(() => kafka) : undefined;
      if (readback) stops.push(() => readback.close());
      const info = (): ServerInfo => ({
        version: VERSION,
        mode: values.mode,
        routerUrl,
        ingressUrl,
        authentication: { enabled: values.authentication.enabled, authUriPath: values.authentication.authUriPath },
        messageQueueTypes: MQ_TYPES.filter((t) => values[MQ_VALUES[t]].enabled),
      });
      // The control plane's /metrics: its own figures, plus the trigger manager's (one process).
      const counted = triggers;
      if (counted) {
        new Gauge({
          name: 'flint_mqtrigger_consumers',
          help: 'Message-queue triggers with a running consumer',
          registers: [metrics],
          collect() {
            this.set(counted.active().length);
          },
        });
      }
      const reports = local ?? leaderClient;
      // The dashboard's charts: this process's router and executor (local mode), or every router pod's /metrics (kubernetes mode).
      const inProcessRouter = routerMetricsText;
      const sampler = new MetricsSampler({
        read: async (): Promise<MetricsText[]> => {
          const texts: MetricsText[] = [];
          if (inProcessRouter) texts.push({ source: 'local', text: await inProcessRouter() });
          else if (kube) {
            const routers = await routerEndpoints(kube, SYSTEM_NAMESPACE);
            texts.push(...(await scrapeRouterMetrics(routers, { token: auth?.mintDashboard })));
          }
          // Only the executor's instance gauges: the whole registry would list the store at every sample.
          if (local instanceof ProcessExecutor) {
            const gauges = await Promise.all(['flint_executor_instances', 'flint_executor_warm_workers'].map((m) => metrics.getSingleMetricAsString(m)));
            texts.push({ source: 'executor', text: gauges.join('\n') });
          }
          return texts;
        },
        onError: (err) => logger.debug({ err }, 'sampling the routers\' counters for the dashboard failed'),
      });
      sampler.start();
      stops.push(async () => sampler.stop());
      const controller = await createController({
        store,
        layout,
        metrics,
        // Per-request lines would drown the log; errors still show.
        logger: logger.child({ component: 'controller' }, { level: values.logLevel === 'debug' || values.logLevel === 'trace' ? values.logLevel : 'warn' }),
        info,
        localImages: values.mode === 'local',
        reservedPaths: ['/router-healthz', '/metrics', values.authentication.authUriPath],
        topics: readback,
        authCheck: auth?.controllerCheck,
        issueToken: auth?.issueToken,
        archives,
        maxUploadBytes: values.archives.maxUploadMB * MIB,
        archiveLimits: { maxEntries: 100_000, maxBytes: maxUnpackedBytes },
        instances: reports ? (ns, name) => reports.instances(ns, name) : undefined,
        functionLogs: leaderClient ? (ns, name, from) => (leaderClient as ExecutorServiceClient).functionLog(ns, name, from) : undefined,
        functionMetrics: sampler,
      });
      limitNodeServer(controller.server, limitsOf('controller', values.controller), dropped('controller'));
      // A SO_REUSEPORT group on fastify's server rather than fastify's listen(), which binds one socket: under a
      // flood of new connections one socket accepts one per batch of events, and the administrator's wait behind it.
      await controller.ready();
      const apiServer = controller.server;
      const { more } = await listenServerGroup(apiServer, {
        host: values.controller.host,
        port: values.controller.port,
        backlog: 511,
        sockets: values.controller.acceptSockets,
      });
      stops.push(async () => {
        // No new connections; those open are cut (watches never end by themselves), as fastify's
        // forceCloseConnections does for a server it listened itself. fastify's close then runs its hooks; its
        // server.close finds the server closed already.
        const closing = closeGroup([apiServer, ...more]);
        apiServer.closeAllConnections();
        await controller.close();
        await closing;
      });
      controllerUrl = urlOf(controller.server.address());
      out(`controller listening on ${controllerUrl}`);
    }
    return { values, controllerUrl, routerUrl, leaveRotation, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Entry for the CLI: runs until SIGINT/SIGTERM. */
export async function runServer(src: ValuesSources): Promise<void> {
  const server = await startServer(src, console.log, (why) => {
    console.error(`${why}: exiting, to come back as a standby`);
    process.exit(1);
  });
  // One component's stray rejection must not take the whole platform down.
  process.on('unhandledRejection', (err) => {
    console.error(`unhandled rejection: ${(err as Error)?.stack ?? String(err)}`);
  });
  let stoppingSince = 0;
  const shutdown = async (signal: string) => {
    if (stoppingSince !== 0) {
      // npm can pass on the terminal's Ctrl-C, so one press may arrive twice at once.
      if (Date.now() - stoppingSince < 1000) return;
      // The way out when a stop hangs: Ctrl-C again.
      console.log(`received ${signal} again, exiting without finishing the stop`);
      process.exit(1);
    }
    stoppingSince = Date.now();
    console.log(`received ${signal}, stopping`);
    await server.leaveRotation();
    await server.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  await new Promise(() => {});
}
