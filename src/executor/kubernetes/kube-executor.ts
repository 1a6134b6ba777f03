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
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { FlintError } from '../../api/errors.ts';
import type { Environment, FunctionResource, Package } from '../../api/kinds.ts';
import { archiveShas } from '../../archive/refs.ts';
import type { DataLayout } from '../../config/layout.ts';
import type { GroupVersionResource, KubeClient, KubeObject, KubeWatch } from '../../store/kube-client.ts';
import { parseLabelSelector, type Store, type Watch } from '../../store/store.ts';
import { FunctionLogs } from '../function-log.ts';
import type { Executor, Lease } from '../types.ts';
import { applyDeployment, DEPLOYMENTS } from './apply-deployment.ts';
import { FunctionDeployments, functionDeploymentName, isNewdeploy, scaleBounds } from './function-deployment.ts';
import { FunctionPods, isReady } from './function-pods.ts';
import { dnsName, ENV_PORT, FETCHER_PORT, FETCHER_TOKEN_SECRET, poolDeployment, poolDeploymentName, poolLabels } from './pool-deployment.ts';
import { specializeRequest } from './specialize-request.ts';

const PODS: GroupVersionResource = { group: '', version: 'v1', resource: 'pods' };
const SERVICES: GroupVersionResource = { group: '', version: 'v1', resource: 'services' };
const SECRETS: GroupVersionResource = { group: '', version: 'v1', resource: 'secrets' };

export interface KubeExecutorOptions {
  store: Store;
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
}

interface Instance {
  pod: string;
  address: string;
  version: string;
  active: number;
  lastUsed: number;
  draining: boolean;
}

interface Waiter {
  resolve(lease: Lease): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
}

interface FnState {
  key: string;
  fn: FunctionResource;
  version: string;
  instances: Set<Instance>;
  starting: number;
  waiters: Waiter[];
  /** After a failed specialization, warming waits until then rather than churn pods. */
  warmAfter?: number;
}

const keyOf = (ns: string, name: string) => `${ns}/${name}`;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export class KubeExecutor implements Executor {
  readonly #o: KubeExecutorOptions;
  readonly #log: Logger;
  readonly #envs = new Map<string, Environment>();
  readonly #packages = new Map<string, Package>();
  readonly #functions = new Map<string, FunctionResource>();
  readonly #fns = new Map<string, FnState>();
  readonly #watches: Watch[] = [];
  #reaper: NodeJS.Timeout | undefined;
  /** A pod check is under way (one at a time). */
  #checking = false;
  #stopped = false;
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

  constructor(o: KubeExecutorOptions) {
    this.#o = o;
    this.#poolSize = o.poolSize ?? 3;
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
  }

  // ---- lifecycle -------------------------------------------------------------------

  async start(): Promise<void> {
    const { store } = this.#o;
    this.#fetcherToken = await this.#ensureFetcherToken();
    await this.#pods.start();
    // Pods an earlier executor specialized hold code no router will be told about: they go.
    await this.#deletePods('executorType=poolmgr,managed=false');
    await this.#deletePods('executorType=newdeploy');
    const envs = await store.list('Environment');
    const pkgs = await store.list('Package');
    const fns = await store.list('Function');
    for (const p of pkgs.items) this.#packages.set(keyOf(p.metadata.namespace, p.metadata.name), p);
    for (const f of fns.items) this.#functions.set(keyOf(f.metadata.namespace, f.metadata.name), f);
    for (const e of envs.items) this.#upsertEnv(e);
    const newdeploys = fns.items.filter(isNewdeploy);
    await this.#functionDeployments.removeAllBut(new Set(newdeploys.map(functionDeploymentName)));
    for (const f of newdeploys) this.#warm(this.#state(f));
    this.#watches.push(
      store.watch({ kind: 'Environment', sinceResourceVersion: envs.resourceVersion }, (ev) => {
        const env = ev.object as Environment;
        if (ev.type === 'DELETED') this.#deleteEnv(env);
        else this.#upsertEnv(env);
      }),
      store.watch({ kind: 'Package', sinceResourceVersion: pkgs.resourceVersion }, (ev) => {
        const pkg = ev.object as Package;
        const key = keyOf(pkg.metadata.namespace, pkg.metadata.name);
        if (ev.type === 'DELETED') this.#packages.delete(key);
        else this.#packages.set(key, pkg);
        for (const st of this.#fns.values()) this.#refreshVersion(st);
      }),
      store.watch({ kind: 'Function', sinceResourceVersion: fns.resourceVersion }, (ev) => {
        const fn = ev.object as FunctionResource;
        const key = keyOf(fn.metadata.namespace, fn.metadata.name);
        const previous = this.#functions.get(key);
        if (ev.type === 'DELETED') {
          this.#functions.delete(key);
          this.#deleteFunction(key, fn.metadata.name);
          if (isNewdeploy(fn)) this.#removeFunctionDeployment(fn);
          return;
        }
        this.#functions.set(key, fn);
        if (isNewdeploy(fn)) {
          this.#warm(this.#state(fn));
          return;
        }
        if (previous && isNewdeploy(previous)) this.#removeFunctionDeployment(previous);
        const st = this.#fns.get(key);
        if (st && st.fn.metadata.uid === fn.metadata.uid && Number(fn.metadata.resourceVersion) > Number(st.fn.metadata.resourceVersion)) {
          st.fn = fn;
          this.#refreshVersion(st);
        }
      }),
    );
    await this.#pools;
    this.#reaper = setInterval(() => this.#reap(), this.#o.reapIntervalMs ?? 5000);
    this.#reaper.unref();
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#stopped = true;
      clearInterval(this.#reaper);
      for (const w of this.#watches.splice(0)) w.close();
      for (const st of this.#fns.values()) {
        for (const w of st.waiters.splice(0)) {
          clearTimeout(w.timer);
          w.reject(new FlintError('FLINT_ERR_UNAVAILABLE', 'the executor is stopping'));
        }
      }
      // Requests under way finish first (bounded: a stuck one does not hold the stop forever).
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && [...this.#fns.values()].some((st) => [...st.instances].some((i) => i.active > 0))) await sleep(50);
      await this.#pools;
      await Promise.all([...this.#fns.values()].flatMap((st) => [...st.instances].map((i) => this.#deletePod(i.pod))));
      this.#fns.clear();
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
    if (!previous || JSON.stringify(previous.spec) === JSON.stringify(env.spec)) return;
    // newdeploy pods run the old image: new ones (from the updated template) take over while these drain.
    for (const st of this.#fns.values()) {
      if (!isNewdeploy(st.fn) || this.#envOf(st.fn) !== env) continue;
      for (const inst of st.instances) this.#drain(st, inst);
      this.#resizeFunctionDeployment(st);
      this.#warm(st);
    }
  }

  #deleteEnv(env: Environment): void {
    this.#envs.delete(keyOf(env.metadata.namespace, env.metadata.name));
    this.#queuePools(() => this.#removePools(env, undefined));
  }

  #queuePools(task: () => Promise<void>): void {
    this.#pools = this.#pools.then(task).catch((err) => this.#log.error({ err }, 'reconciling a pool Deployment failed'));
  }

  async #reconcilePool(env: Environment): Promise<void> {
    const { client, functionNamespace } = this.#o;
    const desired = poolDeployment(env, { namespace: functionNamespace, fetcherImage: this.#o.fetcherImage, enableIstio: this.#o.enableIstio === true, poolSize: this.#poolSize });
    const done = await applyDeployment(client, desired);
    if (done !== 'unchanged') this.#log.info({ environment: env.metadata.name, deployment: desired.metadata.name }, `pool Deployment ${done}`);
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
  #wantedReplicas(st: FnState): number {
    return Math.max(scaleBounds(st.fn).min, st.instances.size + st.starting);
  }

  /** Keeps minScale pods of a newdeploy function specialized before any request needs them. */
  #warm(st: FnState): void {
    if (this.#stopped || this.#fns.get(st.key) !== st || (st.warmAfter ?? 0) > Date.now()) return;
    const live = [...st.instances].filter((i) => !i.draining).length;
    for (let n = live + st.starting; n < scaleBounds(st.fn).min; n++) {
      st.starting++;
      void this.#specialize(st).finally(() => st.starting--);
    }
  }

  /** After a pod of a newdeploy function went: the Deployment shrinks with it instead of starting a generic replacement. */
  #resizeFunctionDeployment(st: FnState): void {
    if (this.#stopped || this.#fns.get(st.key) !== st) return;
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

  #versionOf(fn: FunctionResource): string {
    const ref = fn.spec.package.packageref;
    const pkg = this.#packages.get(keyOf(ref.namespace ?? fn.metadata.namespace, ref.name));
    return `${fn.metadata.uid}:${fn.metadata.resourceVersion}:${pkg ? (archiveShas(pkg.spec.deployment)[0] ?? 'none') : '-'}`;
  }

  #refreshVersion(st: FnState): void {
    const version = this.#versionOf(st.fn);
    if (version === st.version) return;
    st.version = version;
    for (const inst of st.instances) this.#drain(st, inst);
  }

  #state(fn: FunctionResource): FnState {
    const key = keyOf(fn.metadata.namespace, fn.metadata.name);
    const known = this.#functions.get(key);
    if (known && known.metadata.uid === fn.metadata.uid && Number(known.metadata.resourceVersion) > Number(fn.metadata.resourceVersion)) fn = known;
    let st = this.#fns.get(key);
    if (!st || st.fn.metadata.uid !== fn.metadata.uid) {
      if (st) this.#deleteFunction(key, fn.metadata.name);
      st = { key, fn, version: this.#versionOf(fn), instances: new Set(), starting: 0, waiters: [] };
      this.#fns.set(key, st);
    } else if (Number(fn.metadata.resourceVersion) > Number(st.fn.metadata.resourceVersion)) {
      st.fn = fn;
      this.#refreshVersion(st);
    }
    return st;
  }

  #deleteFunction(key: string, name: string): void {
    const st = this.#fns.get(key);
    if (!st) return;
    this.#fns.delete(key);
    for (const w of st.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new FlintError('FLINT_ERR_NOT_FOUND', `function '${name}' was deleted`));
    }
    for (const inst of st.instances) this.#drain(st, inst);
    if (this.#o.enableIstio) void this.#deleteService(st.fn);
    this.#logs?.close(st.fn.metadata.namespace, name);
  }

  #drain(st: FnState, inst: Instance): void {
    inst.draining = true;
    if (inst.active === 0) this.#retire(st, inst);
  }

  #retire(st: FnState, inst: Instance): void {
    if (!st.instances.delete(inst)) return;
    this.#logs?.write(st.fn.metadata.namespace, st.fn.metadata.name, 'flint', `pod ${inst.pod} stopped (${inst.draining ? 'drained' : 'idle'})`);
    void this.#deletePod(inst.pod).then(() => {
      if (!isNewdeploy(st.fn)) return;
      this.#resizeFunctionDeployment(st);
      // A drained pod of an older version is replaced by one of the new.
      this.#warm(st);
    });
  }

  #followLog(fn: FunctionResource, pod: string, container: string): void {
    const logs = this.#logs;
    if (!logs) return;
    const { namespace, name } = fn.metadata;
    const follow = this.#o.client.podLog(this.#o.functionNamespace, pod, { container, follow: true }, (line) => logs.write(namespace, name, 'stdout', line));
    this.#following.set(pod, follow);
    follow.done
      .catch((err) => this.#log.debug({ err, pod }, 'following a pod log ended'))
      .finally(() => {
        if (this.#following.get(pod) === follow) this.#following.delete(pod);
      });
  }

  #reap(): void {
    const now = Date.now();
    for (const st of this.#fns.values()) {
      const idleMs = (st.fn.spec.idletimeout ?? 120) * 1000;
      // newdeploy keeps minScale pods however idle.
      let spare = isNewdeploy(st.fn) ? [...st.instances].filter((i) => !i.draining).length - scaleBounds(st.fn).min : Number.POSITIVE_INFINITY;
      for (const inst of st.instances) {
        if (inst.active > 0) continue;
        if (inst.draining) this.#retire(st, inst);
        else if (now - inst.lastUsed > idleMs && spare > 0) {
          spare--;
          this.#retire(st, inst);
        }
      }
      if (isNewdeploy(st.fn)) this.#warm(st);
    }
    void this.#checkPods();
  }

  /**
   * Pods deleted or failing behind the executor's back (an eviction, a node that went away) stop taking requests,
   * found within a reap interval rather than by a request that fails or waits out a connect timeout.
   */
  async #checkPods(): Promise<void> {
    const held = [...this.#fns.values()].flatMap((st) => [...st.instances].map((inst) => ({ st, inst })));
    if (this.#checking || this.#stopped || held.length === 0) return;
    this.#checking = true;
    try {
      const serving = new Set(this.#pods.list().filter((p) => p.metadata.labels?.functionUid && isReady(p)).map((p) => p.metadata.name as string));
      for (const { st, inst } of held) {
        if (serving.has(inst.pod) || !st.instances.has(inst)) continue;
        this.#logs?.write(st.fn.metadata.namespace, st.fn.metadata.name, 'flint', `pod ${inst.pod} is gone or not ready: requests go to other pods`);
        this.#drain(st, inst);
      }
    } catch (err) {
      this.#log.warn({ err }, 'checking function pods failed');
    } finally {
      this.#checking = false;
    }
  }

  // ---- acquiring --------------------------------------------------------------------------

  #free(st: FnState): Instance | undefined {
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    let best: Instance | undefined;
    for (const inst of st.instances) {
      if (inst.draining || inst.version !== st.version || inst.active >= rpp) continue;
      if (!best || inst.active < best.active) best = inst;
    }
    return best;
  }

  #maxInstances(fn: FunctionResource): number {
    if (isNewdeploy(fn)) return scaleBounds(fn).max;
    // Behind one Service the mesh fronts one pod: Fission's rule with Istio on.
    return this.#o.enableIstio ? 1 : (fn.spec.concurrency ?? 500);
  }

  #lease(st: FnState, inst: Instance, coldStart: boolean): Lease {
    inst.active++;
    let released = false;
    return {
      address: inst.address,
      instanceId: inst.pod,
      coldStart,
      release: (outcome = 'ok') => {
        if (released) return;
        released = true;
        inst.active--;
        inst.lastUsed = Date.now();
        if (outcome !== 'ok' || st.fn.spec.onceOnly) inst.draining = true;
        if (inst.draining) {
          if (inst.active === 0) this.#retire(st, inst);
        } else this.#serveWaiter(st, inst);
      },
    };
  }

  #serveWaiter(st: FnState, inst: Instance): void {
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    while (inst.active < rpp && !inst.draining && inst.version === st.version && st.waiters.length > 0) {
      const w = st.waiters.shift() as Waiter;
      clearTimeout(w.timer);
      w.resolve(this.#lease(st, inst, false));
    }
  }

  tryAcquire(fn: FunctionResource): Lease | undefined {
    if (this.#stopped) return undefined;
    const st = this.#state(fn);
    const inst = this.#free(st);
    return inst ? this.#lease(st, inst, false) : undefined;
  }

  acquire(fn: FunctionResource, signal?: AbortSignal): Promise<Lease> {
    if (this.#stopped) return Promise.reject(new FlintError('FLINT_ERR_UNAVAILABLE', 'the executor is stopping'));
    const st = this.#state(fn);
    const inst = this.#free(st);
    if (inst) return Promise.resolve(this.#lease(st, inst, false));
    return new Promise<Lease>((resolve, reject) => {
      const es = st.fn.spec.invokeStrategy?.executionStrategy;
      const timeoutMs = (es?.specializationTimeout ?? 120) * 1000 + (st.fn.spec.functionTimeout ?? 60) * 1000;
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          if (!this.#removeWaiter(st, waiter)) return;
          reject(new FlintError('FLINT_ERR_TOO_MANY_REQUESTS', `function '${fn.metadata.name}' has no free instance: all ${this.#maxInstances(st.fn)} are busy`));
        }, timeoutMs),
      };
      signal?.addEventListener(
        'abort',
        () => {
          if (this.#removeWaiter(st, waiter)) reject(new FlintError('FLINT_ERR_UNAVAILABLE', 'request aborted'));
        },
        { once: true },
      );
      st.waiters.push(waiter);
      this.#scale(st);
    });
  }

  #removeWaiter(st: FnState, w: Waiter): boolean {
    const i = st.waiters.indexOf(w);
    if (i < 0) return false;
    st.waiters.splice(i, 1);
    clearTimeout(w.timer);
    return true;
  }

  #scale(st: FnState): void {
    const rpp = st.fn.spec.requestsPerPod ?? 1;
    const max = this.#maxInstances(st.fn);
    while (st.waiters.length > st.starting * rpp) {
      const live = [...st.instances].filter((i) => !i.draining).length;
      if (live + st.starting >= max) break;
      st.starting++;
      void this.#specialize(st).finally(() => st.starting--);
    }
  }

  async #specialize(st: FnState): Promise<void> {
    const fn = st.fn;
    const version = st.version;
    try {
      const inst = await this.#newInstance(st, fn, version);
      if (this.#fns.get(st.key) !== st || this.#stopped) {
        void this.#deletePod(inst.pod);
        return;
      }
      st.instances.add(inst);
      const first = st.waiters.shift();
      if (first) {
        clearTimeout(first.timer);
        first.resolve(this.#lease(st, inst, true));
      }
      this.#serveWaiter(st, inst);
      if (inst.version !== st.version) this.#drain(st, inst);
    } catch (err) {
      this.#log.warn({ err, function: fn.metadata.name }, 'specializing a pod failed');
      st.warmAfter = Date.now() + 30_000;
      // Every request waiting now gets the reason, not a timeout later.
      for (const w of st.waiters.splice(0)) {
        clearTimeout(w.timer);
        w.reject(err);
      }
    }
  }

  async #newInstance(st: FnState, fn: FunctionResource, version: string): Promise<Instance> {
    const ns = fn.metadata.namespace;
    const es = fn.spec.invokeStrategy?.executionStrategy;
    const deadline = Date.now() + (es?.specializationTimeout ?? 120) * 1000;
    const envRef = fn.spec.environment;
    const env = this.#envOf(fn);
    if (!env) throw new FlintError('FLINT_ERR_NOT_FOUND', `environment '${envRef.name}' not found in namespace '${envRef.namespace ?? ns}'`);
    const ref = fn.spec.package.packageref;
    const pkg = this.#packages.get(keyOf(ref.namespace ?? ns, ref.name));
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
      pod = await this.#functionDeployments.takePod(fn, env, deadline, () => this.#stopped);
    } else {
      // With the mesh, the function's Service must front only the pod about to be specialized.
      if (this.#o.enableIstio) await this.#deletePods(`functionName=${fn.metadata.name},functionNamespace=${ns},executorType=poolmgr`);
      pod = await this.#claimPod(env, fn, deadline);
    }
    // From the claim on, so what the environment prints while loading the code (a syntax error) is kept too.
    this.#followLog(fn, pod.name, env.metadata.name);
    if (this.#o.enableIstio && !isNewdeploy(fn)) serviceHost = await this.#ensureService(fn);
    const host = serviceHost ?? (pod.ip.includes(':') ? `[${pod.ip}]` : pod.ip);
    try {
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
    return { pod: pod.name, address: `${host}:${ENV_PORT}`, version, active: 0, lastUsed: Date.now(), draining: false };
  }

  /**
   * Takes a ready pod out of the environment's pool by relabelling it; another executor's claim of the same pod
   * conflicts. Waits for the pod watch to show a candidate rather than asking the API server again.
   */
  async #claimPod(env: Environment, fn: FunctionResource, deadline: number): Promise<{ name: string; ip: string }> {
    const { client, functionNamespace } = this.#o;
    const pool = { ...poolLabels(env), managed: 'true' };
    // Versions a claim already lost: tried again only once the watch shows the pod changed.
    const lost = new Map<string, string | undefined>();
    const claimed = await this.#pods.waitFor(
      async () => {
        const pods = this.#pods.list(pool).filter((p) => isReady(p) && lost.get(p.metadata.name) !== p.metadata.resourceVersion);
        for (const pod of pods.sort(() => Math.random() - 0.5)) {
          const labels = {
            ...pod.metadata.labels,
            managed: 'false',
            functionName: fn.metadata.name,
            functionNamespace: fn.metadata.namespace,
            functionUid: fn.metadata.uid,
          };
          try {
            await client.replace(PODS, functionNamespace, pod.metadata.name, { ...pod, metadata: { ...pod.metadata, labels } });
            return { name: pod.metadata.name as string, ip: pod.status.podIP as string };
          } catch (err) {
            if ((err as { code?: string }).code !== 'FLINT_ERR_CONFLICT' && (err as { code?: string }).code !== 'FLINT_ERR_NOT_FOUND') throw err;
            lost.set(pod.metadata.name, pod.metadata.resourceVersion);
          }
        }
        return undefined;
      },
      deadline,
      () => this.#stopped,
    );
    if (claimed) return claimed;
    throw new FlintError(
      'FLINT_ERR_SPECIALIZE_FAILED',
      `function '${fn.metadata.name}': no ready pod in environment '${env.metadata.name}''s pool (Deployment ${poolDeploymentName(env)}, poolsize ${env.spec.poolsize ?? this.#poolSize}) within specializationTimeout`,
    );
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
