// Kubernetes mode's executor, poolmgr strategy: each environment keeps a
// warm pool Deployment of generic pods (pool-deployment.ts); a function's
// first request claims a ready pool pod by relabelling it (with its
// resourceVersion, so two executors cannot claim the same pod), has the
// pod's fetcher load the code, and leases podIP:8888 to the router. More
// pods are claimed while concurrent requests outnumber requestsPerPod per
// pod, up to `concurrency`; a pod idle for idletimeout is deleted; a changed
// function or package gets new pods while the old ones drain; a pod that
// stops answering is deleted. With enableIstio, a function is served by one
// pod behind a Service `istio-<fn>-<ns>`, reached by its cluster DNS name,
// as Fission does, so the mesh sees Service traffic. newdeploy functions
// take their pods from a Deployment of their own (function-deployment.ts),
// kept at minScale specialized pods and grown up to maxScale. A claimed pod's
// environment container log is followed into the function's log file, with
// the executor's own lines about the pod, so `flint fn log` reads the same
// in both modes. Pods are known from one watch of the function namespace
// (function-pods.ts), never by listing them while something waits.
// Specialized pods, pool and newdeploy alike, outlive the executor: the next
// one adopts those still current (adoption.ts).
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { FlintError } from '../../api/errors.ts';
import type { InstancesReport } from '../../api/instances.ts';
import type { Environment, FunctionResource, Package } from '../../api/kinds.ts';
import { archiveShas } from '../../archive/refs.ts';
import type { DataLayout } from '../../config/layout.ts';
import type { GroupVersionResource, KubeClient, KubeObject, KubeWatch } from '../../store/kube-client.ts';
import { parseLabelSelector, type Store } from '../../store/store.ts';
import { CoreExecutor } from '../core/core-executor.ts';
import { InstanceCore, slotKey as keyOf } from '../core/instance-core.ts';
import { InstanceState } from '../core/instance-state.ts';
import type { FunctionSlot } from '../core/types.ts';
import { ExpectedFirstCalls, expectFirstCall, functionsOf, MAX_GROWTH } from '../first-calls.ts';
import { FunctionLogs } from '../function-log.ts';
import { fetcherState, SPECIALIZED_FOR } from './adoption.ts';
import { applyDeployment, DEPLOYMENTS } from './apply-deployment.ts';
import { FunctionDeployments, functionDeploymentName, isNewdeploy, scaleBounds } from './function-deployment.ts';
import { FunctionPods, isReady, PODS } from './function-pods.ts';
import { dnsName, ENV_PORT, FETCHER_PORT, FETCHER_TOKEN_SECRET, poolDeployment, poolDeploymentName, poolLabels } from './pool-deployment.ts';
import { specializeRequest } from './specialize-request.ts';

const SERVICES: GroupVersionResource = { group: '', version: 'v1', resource: 'services' };
const SECRETS: GroupVersionResource = { group: '', version: 'v1', resource: 'secrets' };

export interface KubeExecutorOptions {
  store: Store;
  /** Requests waiting for one function's pods: how many at most, and how long one waits for a free slot (default 1000, 10 s). */
  queue?: { maxLength: number; timeoutMs: number };
  client: KubeClient;
  logger: Logger;
  /** Where pool and function pods live. */
  functionNamespace: string;
  /** The image of `flint fetcher`, beside each environment container. */
  fetcherImage: string;
  /** The control plane as pods reach it: archives are downloaded from `<url>/v1/archives/<sha256>`. Read when a pod is specialized. */
  controllerUrl: string | (() => string);
  /** The Authorization header for archive downloads, when the control plane wants one. */
  archiveAuthorization?: () => string | undefined;
  enableIstio?: boolean;
  /** Pool pods of an environment that sets no poolsize (default 3). */
  poolSize?: number;
  /** How a Service is reached: its cluster DNS name (`<name>.<namespace>`) by default. */
  serviceHost?: (name: string, namespace: string) => string | Promise<string>;
  reapIntervalMs?: number;
  /** Where function logs are written (`flint fn log` reads them); none: pod logs are not followed. */
  layout?: DataLayout;
  /** How long one watch of the function namespace's pods lasts before it is watched again. */
  watchTimeoutSeconds?: number;
  /** How long a function created or given new code counts for a pool pod more (first-calls.ts); 0 or unset: never. */
  firstCallWindowSeconds?: number;
}

/** A specialized pod, as the instance core tracks it. */
class PodInstance extends InstanceState {
  readonly id: string;
  readonly address: string;
  /** Deleted or not ready behind the executor's back. */
  gone = false;

  constructor(pod: string, address: string, version: string) {
    super(version);
    this.id = pod;
    this.address = address;
  }

  usable(): boolean {
    return !this.gone;
  }
}

type Slot = FunctionSlot<PodInstance>;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export class KubeExecutor extends CoreExecutor<PodInstance> {
  readonly #o: KubeExecutorOptions;
  readonly #log: Logger;
  readonly #envs = new Map<string, Environment>();
  #reaper: NodeJS.Timeout | undefined;
  #stopping: Promise<void> | undefined;
  readonly #logs: FunctionLogs | undefined;
  readonly #functionDeployments: FunctionDeployments;
  readonly #pods: FunctionPods;
  /** What every fetcher wants on a specialize request; read (or made) once at start. */
  #fetcherToken = '';
  /** Pod log streams being copied into function logs, by pod name. */
  readonly #following = new Map<string, KubeWatch>();
  readonly #poolSize: number;
  /** Pool reconciliations, one after another, so a quick env change cannot race its own cleanup. */
  #pools: Promise<void> = Promise.resolve();
  readonly #firstCalls: ExpectedFirstCalls;
  /** Environment key -> the pool pods beyond its size last written to its Deployment, for the first calls expected. */
  readonly #poolExtra = new Map<string, number>();
  /** Environments with a resize queued: one is enough, as it reads the count when it runs. */
  readonly #resizeQueued = new Set<string>();
  /**
   * Pool pods a claim of this executor has begun relabelling -> the resourceVersion it began from. The others here
   * try other pods: concurrent first calls picking at random among the same pods conflicted on the API server, and
   * each loser waited for the watch before trying again (claims of a burst of 20 took up to a second). Kept after a
   * claim succeeds until the watch shows the pod changed, so a claim reading the pod list before that skips it too.
   */
  readonly #claiming = new Map<string, string>();

  constructor(o: KubeExecutorOptions) {
    super();
    this.#o = o;
    this.#poolSize = o.poolSize ?? 3;
    this.#firstCalls = new ExpectedFirstCalls((o.firstCallWindowSeconds ?? 0) * 1000);
    this.#log = o.logger;
    this.#logs = o.layout ? new FunctionLogs(o.layout, (namespace, name, err) => this.#log.error({ namespace, fn: name, err: err.message }, "refusing to write this function's log: its file or directory is not the server's own")) : undefined;
    this.#pods = new FunctionPods({
      client: o.client,
      namespace: o.functionNamespace,
      watchTimeoutSeconds: o.watchTimeoutSeconds,
      onError: (err) => this.#log.warn({ err }, 'following the function pods failed; retrying'),
    });
    this.#functionDeployments = new FunctionDeployments({
      client: o.client,
      namespace: o.functionNamespace,
      fetcherImage: o.fetcherImage,
      enableIstio: o.enableIstio === true,
      pods: this.#pods,
    });
    this.core = new InstanceCore<PodInstance>({
      queue: o.queue,
      backend: {
        startInstance: (slot, version) => this.#newInstance(slot, version),
        stopInstance: (slot, inst) => {
          void this.#deletePod(inst.id).then(() => {
            // The Deployment shrinks with it (once the pod is going, so its ReplicaSet takes no other) instead of starting a generic replacement.
            if (isNewdeploy(slot.fn)) this.#resizeFunctionDeployment(slot);
          });
        },
        versionOf: (fn) => this.#versionOf(fn),
        maxInstances: (fn) => {
          if (isNewdeploy(fn)) return scaleBounds(fn).max;
          // Behind one Service the mesh fronts one pod: Fission's rule with Istio on.
          return this.#o.enableIstio ? 1 : (fn.spec.concurrency ?? 500);
        },
        log: (fn, line) => this.#logs?.write(fn.metadata.namespace, fn.metadata.name, 'flint', line),
      },
    });
  }

  // ---- lifecycle -------------------------------------------------------------------

  async start(): Promise<void> {
    const { store } = this.#o;
    this.#fetcherToken = await this.#ensureFetcherToken();
    await this.#pods.start();
    const envs = await store.list('Environment');
    const pkgs = await store.list('Package');
    const fns = await store.list('Function');
    for (const p of pkgs.items) this.packages.set(keyOf(p.metadata.namespace, p.metadata.name), p);
    for (const f of fns.items) this.functions.set(keyOf(f.metadata.namespace, f.metadata.name), f);
    for (const e of envs.items) this.#envs.set(keyOf(e.metadata.namespace, e.metadata.name), e);
    for (const f of fns.items) expectFirstCall(this.#firstCalls, f, this.packages, this.#versionOf(f), false);
    for (const e of envs.items) this.#upsertEnv(e);
    const newdeploys = fns.items.filter(isNewdeploy);
    await this.#functionDeployments.removeAllBut(new Set(newdeploys.map(functionDeploymentName)));
    // Pool and newdeploy pods an earlier executor specialized: adopted while they serve current code, else deleted (adoption.ts).
    await this.#adoptPods();
    for (const f of fns.items) this.core.upsertFunction(f);
    // The replicas the last leader left count pods it was starting or draining, and those just deleted: each newdeploy
    // Deployment is set to the pods adopted (and any started for minScale), or its spare pods would run on unused.
    for (const st of this.core.slots()) if (isNewdeploy(st.fn)) this.#resizeFunctionDeployment(st);
    this.watches.push(
      store.watch({ kind: 'Environment', sinceResourceVersion: envs.resourceVersion }, (ev) => {
        const env = ev.object as Environment;
        if (ev.type === 'DELETED') this.#deleteEnv(env);
        else this.#upsertEnv(env);
      }),
      store.watch({ kind: 'Package', sinceResourceVersion: pkgs.resourceVersion }, (ev) => {
        const pkg = ev.object as Package;
        const key = keyOf(pkg.metadata.namespace, pkg.metadata.name);
        if (ev.type === 'DELETED') this.packages.delete(key);
        else {
          this.packages.set(key, pkg);
          for (const fn of functionsOf(pkg, this.functions.values())) expectFirstCall(this.#firstCalls, fn, this.packages, this.#versionOf(fn), true);
          this.#resizePools();
        }
        this.core.refreshAll();
      }),
      store.watch({ kind: 'Function', sinceResourceVersion: fns.resourceVersion }, (ev) => {
        const fn = ev.object as FunctionResource;
        const key = keyOf(fn.metadata.namespace, fn.metadata.name);
        const previous = this.functions.get(key);
        if (ev.type === 'DELETED') {
          this.functions.delete(key);
          this.#firstCalls.forget(key);
          this.#resizePools();
          this.core.deleteFunction(fn);
          if (this.#o.enableIstio) void this.#deleteService(fn);
          this.#logs?.close(fn.metadata.namespace, fn.metadata.name);
          if (isNewdeploy(fn)) this.#removeFunctionDeployment(fn);
          return;
        }
        this.functions.set(key, fn);
        if (previous && isNewdeploy(previous) && !isNewdeploy(fn)) this.#removeFunctionDeployment(previous);
        expectFirstCall(this.#firstCalls, fn, this.packages, this.#versionOf(fn), true);
        this.#resizePools();
        this.core.upsertFunction(fn);
      }),
    );
    await this.#pools;
    this.#reaper = setInterval(() => this.#reap(), this.#o.reapIntervalMs ?? 5000);
    this.#reaper.unref();
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.stopped = true;
      clearInterval(this.#reaper);
      for (const w of this.watches.splice(0)) w.close();
      // Pods serving current code stay for the next executor to adopt (in an upgrade or a failover it runs already, and
      // serves on them); draining ones go, as the next one would delete them. A pod still being specialized is not an
      // instance yet: the next executor finds it unfinished and deletes it.
      const left = new Set(
        [...this.core.slots()].flatMap((st) => [...st.instances].filter((i) => !i.draining && i.version === st.version).map((i) => i.id)),
      );
      const instances = this.core.stop();
      // Requests under way finish first (bounded: a stuck one does not hold the stop forever).
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && this.core.busy()) await sleep(50);
      await this.#pools;
      await Promise.all(instances.filter((i) => !left.has(i.id)).map((i) => this.#deletePod(i.id)));
      await this.#pods.stop();
      for (const f of this.#following.values()) f.close();
      this.#following.clear();
      await this.#logs?.closeAll();
    })();
    return this.#stopping;
  }

  /** The fetchers' token, kept in a Secret so pod templates name it and stay the same across restarts. */
  async #ensureFetcherToken(): Promise<string> {
    const { client, functionNamespace } = this.#o;
    for (let attempt = 0; ; attempt++) {
      const current = await client.get<KubeObject & { data?: Record<string, string> }>(SECRETS, functionNamespace, FETCHER_TOKEN_SECRET);
      const token = current?.data?.token ? Buffer.from(current.data.token, 'base64').toString('utf8') : '';
      if (token) return token;
      const fresh = randomBytes(32).toString('base64url');
      const secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: FETCHER_TOKEN_SECRET, namespace: functionNamespace, labels: { 'app.kubernetes.io/managed-by': 'flint' } },
        type: 'Opaque',
        data: { token: Buffer.from(fresh).toString('base64') },
      } as KubeObject;
      try {
        if (current) await client.replace(SECRETS, functionNamespace, FETCHER_TOKEN_SECRET, { ...current, data: (secret as any).data });
        else await client.create(SECRETS, functionNamespace, secret);
        return fresh;
      } catch (err) {
        // Another control plane made it first: read theirs.
        const code = (err as { code?: string }).code;
        if (attempt >= 3 || (code !== 'FLINT_ERR_ALREADY_EXISTS' && code !== 'FLINT_ERR_CONFLICT')) throw err;
      }
    }
  }

  // ---- pools -------------------------------------------------------------------------

  #upsertEnv(env: Environment): void {
    const key = keyOf(env.metadata.namespace, env.metadata.name);
    const previous = this.#envs.get(key);
    this.#envs.set(key, env);
    this.#queuePools(() => this.#reconcilePool(env));
    // Specialized pods run the old image and settings: pods of the new ones take over while these drain (versionOf).
    if (previous && JSON.stringify(previous.spec) !== JSON.stringify(env.spec)) this.core.refreshAll();
  }

  #deleteEnv(env: Environment): void {
    this.#envs.delete(keyOf(env.metadata.namespace, env.metadata.name));
    this.#poolExtra.delete(keyOf(env.metadata.namespace, env.metadata.name));
    this.#queuePools(() => this.#removePools(env, undefined));
  }

  #queuePools(task: () => Promise<void>): void {
    this.#pools = this.#pools.then(task).catch((err) => this.#log.error({ err }, 'reconciling a pool Deployment failed'));
  }

  /** Pool pods beyond an environment's size for the first calls expected soon (none for a pool of size 0). */
  #extraFor(env: Environment): number {
    if ((env.spec.poolsize ?? this.#poolSize) === 0) return 0;
    return Math.min(MAX_GROWTH, this.#firstCalls.count(keyOf(env.metadata.namespace, env.metadata.name)));
  }

  /**
   * Pool Deployments whose replicas differ from what the first calls expected now want get one resize queued each
   * (a burst of a hundred new functions writes as often as the queue drains, not a hundred times). Called on the
   * watches' events, after claims, and on every reap, which also retries a write that failed.
   */
  #resizePools(): void {
    if (this.stopped) return;
    for (const [key, env] of this.#envs) {
      if ((this.#poolExtra.get(key) ?? 0) === this.#extraFor(env) || this.#resizeQueued.has(key)) continue;
      this.#resizeQueued.add(key);
      this.#queuePools(async () => {
        this.#resizeQueued.delete(key);
        const newest = this.#envs.get(key);
        if (newest) await this.#reconcilePool(newest, true);
      });
    }
  }

  /** `resizeOnly`: only the replicas may have changed, so no older pool Deployment can be left to remove. */
  async #reconcilePool(env: Environment, resizeOnly = false): Promise<void> {
    const { client, functionNamespace } = this.#o;
    const key = keyOf(env.metadata.namespace, env.metadata.name);
    // The newest copy: a queued reconciliation may run after the environment changed again.
    if (this.#envs.get(key) !== env) return;
    const extra = this.#extraFor(env);
    const desired = poolDeployment(env, { namespace: functionNamespace, fetcherImage: this.#o.fetcherImage, enableIstio: this.#o.enableIstio === true, poolSize: this.#poolSize, extra });
    const done = await applyDeployment(client, desired);
    // Recorded once written: a write that failed leaves the old count, which the next reap finds different.
    this.#poolExtra.set(key, extra);
    if (done !== 'unchanged') this.#log.info({ environment: env.metadata.name, deployment: desired.metadata.name, replicas: (desired.spec as { replicas: number }).replicas }, `pool Deployment ${done}`);
    if (resizeOnly) return;
    // The name carries the environment's version: any other one of this environment is an older pool.
    await this.#removePools(env, desired.metadata.name);
  }

  async #removePools(env: Environment, keep: string | undefined): Promise<void> {
    const { client, functionNamespace } = this.#o;
    const selector = `executorType=poolmgr,environmentName=${env.metadata.name},environmentNamespace=${env.metadata.namespace}`;
    const list = await client.list<KubeObject>(DEPLOYMENTS, functionNamespace, { labelSelector: selector });
    for (const d of list.items) {
      if (d.metadata.name === keep) continue;
      await client.delete(DEPLOYMENTS, functionNamespace, d.metadata.name);
      this.#log.info({ environment: env.metadata.name, deployment: d.metadata.name }, 'old pool Deployment deleted');
    }
  }

  async #deletePods(selector: string): Promise<void> {
    const match = parseLabelSelector(selector);
    const pods = this.#pods.list().filter((p) => match(p.metadata.labels) && !p.metadata.deletionTimestamp);
    await Promise.all(pods.map((p) => this.#deletePod(p.metadata.name)));
  }

  /**
   * Takes over the specialized pods an earlier executor left, or deletes them (see adoption.ts): claimed pool pods,
   * and newdeploy pods it annotated. A newdeploy pod without the annotation was never handed out, and is left to be.
   */
  async #adoptPods(): Promise<void> {
    const pool = parseLabelSelector('executorType=poolmgr,managed=false');
    const dedicated = parseLabelSelector('executorType=newdeploy');
    const pods = this.#pods.list().filter((p) => !p.metadata.deletionTimestamp && (pool(p.metadata.labels) || (dedicated(p.metadata.labels) && p.metadata.annotations?.[SPECIALIZED_FOR])));
    await Promise.all(
      pods.map(async (pod: any) => {
        const l = pod.metadata.labels ?? {};
        const fn = this.functions.get(keyOf(l.functionNamespace, l.functionName));
        const version = fn && this.#versionOf(fn);
        const kindMatches = fn !== undefined && isNewdeploy(fn) === (l.executorType === 'newdeploy');
        const current = fn !== undefined && kindMatches && fn.metadata.uid === l.functionUid && pod.metadata.annotations?.[SPECIALIZED_FOR] === version;
        const ip: string = pod.status?.podIP ?? '';
        const host = ip.includes(':') ? `[${ip}]` : ip;
        if (current && isReady(pod) && (await fetcherState(host)) === 'specialized') await this.#adopt(fn, pod.metadata.name, host, version as string);
        else await this.#deletePod(pod.metadata.name);
      }),
    );
  }

  async #adopt(fn: FunctionResource, pod: string, podHost: string, version: string): Promise<void> {
    // A newdeploy function's pods are reached directly, mesh or not (#newInstance).
    const host = this.#o.enableIstio && !isNewdeploy(fn) ? await this.#ensureService(fn) : podHost;
    if (isNewdeploy(fn)) this.#functionDeployments.adopted(pod);
    this.core.adopt(fn, new PodInstance(pod, `${host}:${ENV_PORT}`, version));
    // The pod's output from its start: a log kept across the restart gets it again, one that was lost gets it back.
    this.#followLog(fn, pod, fn.spec.environment.name);
    this.#log.info({ function: fn.metadata.name, pod }, 'pod adopted');
    this.#logs?.write(fn.metadata.namespace, fn.metadata.name, 'flint', `pod ${pod} adopted from an earlier control plane`);
  }

  async #deletePod(name: string): Promise<void> {
    this.#following.get(name)?.close();
    this.#following.delete(name);
    this.#pods.deleted(name);
    try {
      await this.#o.client.delete(PODS, this.#o.functionNamespace, name);
    } catch (err) {
      this.#log.warn({ err, pod: name }, 'deleting a function pod failed');
    }
    this.#functionDeployments.forget(name);
  }

  // ---- newdeploy -----------------------------------------------------------------------

  /** The replicas a newdeploy function's Deployment should have: every pod it serves or drains, and those being started, at least minScale. */
  #wantedReplicas(st: Slot): number {
    return Math.max(scaleBounds(st.fn).min, st.instances.size + st.starting);
  }

  /** Sets a newdeploy function's Deployment to the pods it serves, drains and starts. */
  #resizeFunctionDeployment(st: Slot): void {
    // A deleted function's Deployment goes with it (#removeFunctionDeployment): its last pods must not bring it back.
    if (this.stopped || !this.core.isLive(st)) return;
    const env = this.#envOf(st.fn);
    if (!env) return;
    this.#queuePools(() => this.#functionDeployments.ensure(st.fn, env, this.#wantedReplicas(st)));
  }

  #removeFunctionDeployment(fn: FunctionResource): void {
    this.#queuePools(async () => {
      await this.#functionDeployments.remove(fn);
    });
  }

  #envOf(fn: FunctionResource): Environment | undefined {
    const ref = fn.spec.environment;
    return this.#envs.get(keyOf(ref.namespace ?? fn.metadata.namespace, ref.name));
  }

  // ---- functions -----------------------------------------------------------------------

  /** The function, its code and its environment's settings (a pod runs the image and settings it was made with). */
  #versionOf(fn: FunctionResource): string {
    const ref = fn.spec.package.packageref;
    const pkg = this.packages.get(keyOf(ref.namespace ?? fn.metadata.namespace, ref.name));
    const env = this.#envOf(fn);
    const envDigest = env ? createHash('sha256').update(JSON.stringify(env.spec)).digest('hex').slice(0, 12) : '-';
    return `${fn.metadata.uid}:${fn.metadata.resourceVersion}:${pkg ? (archiveShas(pkg.spec.deployment)[0] ?? 'none') : '-'}:${envDigest}`;
  }

  #followLog(fn: FunctionResource, pod: string, container: string): void {
    const logs = this.#logs;
    if (!logs) return;
    const { namespace, name } = fn.metadata;
    const follow = this.#o.client.podLog(this.#o.functionNamespace, pod, { container, follow: true }, (line) => logs.write(namespace, name, 'stdout', line, pod));
    this.#following.set(pod, follow);
    follow.done
      .catch((err) => this.#log.debug({ err, pod }, 'following a pod log ended'))
      .finally(() => {
        if (this.#following.get(pod) === follow) this.#following.delete(pod);
      });
  }

  #reap(): void {
    this.core.reap();
    this.#checkPods();
    // Expected first calls whose window passed.
    this.#resizePools();
  }

  /**
   * Pods deleted or failing behind the executor's back (an eviction, a node that went away) stop taking requests,
   * found within a reap interval rather than by a request that fails or waits out a connect timeout.
   */
  #checkPods(): void {
    if (this.stopped) return;
    const serving = new Set(this.#pods.list().filter((p) => p.metadata.labels?.functionUid && isReady(p)).map((p) => p.metadata.name as string));
    for (const st of this.core.slots()) {
      for (const inst of st.instances) {
        if (serving.has(inst.id) || inst.gone) continue;
        inst.gone = true;
        this.#logs?.write(st.fn.metadata.namespace, st.fn.metadata.name, 'flint', `pod ${inst.id} is gone or not ready: requests go to other pods`);
        this.core.drain(st, inst);
      }
    }
  }

  // ---- acquiring --------------------------------------------------------------------------




  /** A line of Flint's own in a function's log (a time trigger's run); false when this executor keeps no log or it was refused. */
  writeFunctionLog(namespace: string, name: string, line: string): boolean {
    return this.#logs?.write(namespace, name, 'flint', line) ?? false;
  }

  /** A function's pods as the executor holds them, for `flint fn pods`. */
  instances(namespace: string, name: string): InstancesReport {
    return this.core.report(namespace, name);
  }

  async #newInstance(st: Slot, version: string): Promise<PodInstance> {
    const fn = st.fn;
    const ns = fn.metadata.namespace;
    const es = fn.spec.invokeStrategy?.executionStrategy;
    const deadline = Date.now() + (es?.specializationTimeout ?? 120) * 1000;
    const envRef = fn.spec.environment;
    // The watches may lag the request (a function made just after an API-server restart, while they reconnect): what
    // they have not delivered yet is read from the store.
    const env = this.#envOf(fn) ?? (await this.#o.store.get('Environment', envRef.namespace ?? ns, envRef.name));
    if (!env) throw new FlintError('FLINT_ERR_NOT_FOUND', `environment '${envRef.name}' not found in namespace '${envRef.namespace ?? ns}'`);
    const ref = fn.spec.package.packageref;
    const pkg = this.packages.get(keyOf(ref.namespace ?? ns, ref.name)) ?? (await this.#o.store.get('Package', ref.namespace ?? ns, ref.name));
    if (!pkg) throw new FlintError('FLINT_ERR_NOT_FOUND', `package '${ref.name}' not found in namespace '${ref.namespace ?? ns}'`);
    const body = await specializeRequest({
      store: this.#o.store,
      fn,
      pkg,
      env,
      controllerUrl: typeof this.#o.controllerUrl === 'function' ? this.#o.controllerUrl() : this.#o.controllerUrl,
      authorization: this.#o.archiveAuthorization?.(),
    });
    let pod: { name: string; ip: string };
    let serviceHost: string | undefined;
    if (isNewdeploy(fn)) {
      // Its own pods, reached directly (the mesh still sees pod-to-pod traffic): the executor picks which pod serves.
      await this.#functionDeployments.ensure(fn, env, this.#wantedReplicas(st));
      pod = await this.#functionDeployments.takePod(fn, env, version, deadline, () => this.stopped);
    } else {
      // With the mesh, the function's Service must front only the pod about to be specialized.
      if (this.#o.enableIstio) await this.#deletePods(`functionName=${fn.metadata.name},functionNamespace=${ns},executorType=poolmgr`);
      pod = await this.#claimPod(env, fn, version, deadline);
      // The pod the pool grew for has been taken: the replica it held is given back. (The ReplicaSet may have begun a
      // replacement for the pod it lost by then; the lower count removes one again.)
      if (this.#firstCalls.started(st.key, version)) this.#resizePools();
    }
    // From the claim on, so what the environment prints while loading the code (a syntax error) is kept too.
    this.#followLog(fn, pod.name, env.metadata.name);
    if (this.#o.enableIstio && !isNewdeploy(fn)) serviceHost = await this.#ensureService(fn);
    const host = serviceHost ?? (pod.ip.includes(':') ? `[${pod.ip}]` : pod.ip);
    try {
      if (serviceHost) await this.#untilRoutable(serviceHost, pod.name, deadline);
      const res = await fetch(`http://${host}:${FETCHER_PORT}/specialize`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.#fetcherToken}` },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())),
      });
      const text = await res.text();
      if (res.status !== 200) {
        let message = text;
        try {
          message = JSON.parse(text).error ?? text;
        } catch {}
        throw new FlintError('FLINT_ERR_SPECIALIZE_FAILED', `function '${fn.metadata.name}' failed to specialize on pod ${pod.name}: ${message}`);
      }
    } catch (caught) {
      const why = (caught as Error).name === 'TimeoutError' ? `no answer within specializationTimeout (${es?.specializationTimeout ?? 120} s)` : (caught as Error).message;
      const err = caught instanceof FlintError ? caught : new FlintError('FLINT_ERR_SPECIALIZE_FAILED', `function '${fn.metadata.name}' failed to specialize on pod ${pod.name}: ${why}`, { cause: caught });
      this.#logs?.write(ns, fn.metadata.name, 'flint', err.message);
      void this.#deletePod(pod.name);
      throw err;
    }
    this.#log.info({ function: fn.metadata.name, pod: pod.name }, 'pod specialized');
    this.#logs?.write(ns, fn.metadata.name, 'flint', `pod ${pod.name} specialized`);
    return new PodInstance(pod.name, `${host}:${ENV_PORT}`, version);
  }

  /**
   * Takes a ready pod out of the environment's pool by relabelling it; another executor's claim of the same pod
   * conflicts. Waits for the pod watch to show a candidate rather than asking the API server again.
   */
  async #claimPod(env: Environment, fn: FunctionResource, version: string, deadline: number): Promise<{ name: string; ip: string }> {
    const { client, functionNamespace } = this.#o;
    const pool = { ...poolLabels(env), managed: 'true' };
    // Versions a claim already lost: tried again only once the watch shows the pod changed.
    const lost = new Map<string, string | undefined>();
    const claimed = await this.#pods.waitFor(
      async () => {
        this.#forgetClaimed();
        const pods = this.#pods.list(pool).filter((p) => isReady(p) && lost.get(p.metadata.name) !== p.metadata.resourceVersion);
        for (const pod of pods.sort(() => Math.random() - 0.5)) {
          // Another claim here took it while this one waited on the API server.
          if (this.#claiming.has(pod.metadata.name)) continue;
          this.#claiming.set(pod.metadata.name, pod.metadata.resourceVersion);
          const labels = {
            ...pod.metadata.labels,
            managed: 'false',
            functionName: fn.metadata.name,
            functionNamespace: fn.metadata.namespace,
            functionUid: fn.metadata.uid,
          };
          // What it is being specialized for, so the next executor can tell whether to adopt it.
          const annotations = { ...pod.metadata.annotations, [SPECIALIZED_FOR]: version };
          try {
            await client.replace(PODS, functionNamespace, pod.metadata.name, { ...pod, metadata: { ...pod.metadata, labels, annotations } });
            return { name: pod.metadata.name as string, ip: pod.status.podIP as string };
          } catch (err) {
            // Unless another claim has marked it since: then the mark is that claim's.
            if (this.#claiming.get(pod.metadata.name) === pod.metadata.resourceVersion) this.#claiming.delete(pod.metadata.name);
            // Claims that skipped it look again: a failure that changed nothing in the cluster brings no watch event.
            this.#pods.poke();
            if ((err as { code?: string }).code !== 'FLINT_ERR_CONFLICT' && (err as { code?: string }).code !== 'FLINT_ERR_NOT_FOUND') throw err;
            lost.set(pod.metadata.name, pod.metadata.resourceVersion);
          }
        }
        return undefined;
      },
      deadline,
      () => this.stopped,
    );
    if (claimed) return claimed;
    throw new FlintError(
      'FLINT_ERR_SPECIALIZE_FAILED',
      `function '${fn.metadata.name}': no ready pod in environment '${env.metadata.name}''s pool (Deployment ${poolDeploymentName(env)}, poolsize ${env.spec.poolsize ?? this.#poolSize}) within specializationTimeout`,
    );
  }

  /** Claims whose pods the watch shows changed (relabelled, or gone) need no skipping any more; every environment's. */
  #forgetClaimed(): void {
    if (this.#claiming.size === 0) return;
    const listed = new Map(this.#pods.list().map((p) => [p.metadata.name as string, p.metadata.resourceVersion as string]));
    for (const [name, version] of this.#claiming) if (listed.get(name) !== version) this.#claiming.delete(name);
  }

  // ---- mesh --------------------------------------------------------------------------------

  #serviceName(fn: FunctionResource): string {
    return dnsName(`istio-${fn.metadata.name}-${fn.metadata.namespace}`);
  }

  async #ensureService(fn: FunctionResource): Promise<string> {
    const { client, functionNamespace } = this.#o;
    const name = this.#serviceName(fn);
    const service: KubeObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: functionNamespace, labels: { functionName: fn.metadata.name } },
      spec: {
        type: 'ClusterIP',
        selector: { functionName: fn.metadata.name, functionUid: fn.metadata.uid },
        ports: [
          { name: 'http-fetcher', port: FETCHER_PORT, targetPort: FETCHER_PORT },
          { name: 'http-env', port: ENV_PORT, targetPort: ENV_PORT },
        ],
      },
    };
    const current = await client.get<KubeObject>(SERVICES, functionNamespace, name);
    if (!current) await client.create(SERVICES, functionNamespace, service);
    else if (JSON.stringify((current.spec as any)?.selector) !== JSON.stringify((service.spec as any).selector)) {
      await client.replace(SERVICES, functionNamespace, name, { ...current, spec: { ...(current.spec as object), selector: (service.spec as any).selector } });
    }
    return this.#o.serviceHost ? this.#o.serviceHost(name, functionNamespace) : `${name}.${functionNamespace}`;
  }

  /**
   * A Service routes once cluster DNS and the nodes' proxies know it and its new endpoint, a moment after it is
   * written: the specialize request (and the function's first call) wait for that instead of failing on it.
   */
  async #untilRoutable(service: string, pod: string, deadline: number): Promise<void> {
    for (;;) {
      // `generic`: the claimed pod answers there, not one the Service fronted before.
      if ((await fetcherState(service, Math.max(1, Math.min(2000, deadline - Date.now())))) === 'generic') return;
      if (Date.now() >= deadline || this.stopped) throw new FlintError('FLINT_ERR_SPECIALIZE_FAILED', `Service ${service} did not route to pod ${pod} within specializationTimeout`);
      await sleep(100);
    }
  }

  async #deleteService(fn: FunctionResource): Promise<void> {
    try {
      await this.#o.client.delete(SERVICES, this.#o.functionNamespace, this.#serviceName(fn));
    } catch (err) {
      this.#log.warn({ err, function: fn.metadata.name }, 'deleting a function Service failed');
    }
  }
}

export function createKubeExecutor(o: KubeExecutorOptions): KubeExecutor {
  return new KubeExecutor(o);
}
