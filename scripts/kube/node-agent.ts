// A node agent: the kubelet's part of a node, for a control plane without a
// container runtime. It registers a Node, runs the pods the scheduler binds
// to it as sandboxed processes (pod-sandbox.ts), writes their status (IP,
// phase, readiness from their probes, restarts), restarts crashed containers
// per restartPolicy, finishes graceful deletion, and serves
// /containerLogs/... over HTTPS for the API server's `pods/log` proxy. It
// creates and deletes no pod of its own will: the ReplicaSet controller does
// that, as in any cluster.
//
// Where it differs from a kubelet, and why:
// - No network namespace per pod: each pod gets a loopback address
//   (127.x.y.z) as its IP and its containers listen on it (FLINT_HOST, or
//   POD_IP from the downward API). A program that listens on 0.0.0.0 takes
//   its port on every pod's address: the chart has chart.listenOnPodIP for
//   this.
// - Services are served by a userspace proxy (service-proxy.ts) on loopback
//   addresses of their own, named in each pod's /etc/hosts, instead of
//   kube-proxy's ClusterIP rewriting and cluster DNS.
// - With the node-lifecycle controller off (it would taint and evict pods
//   whenever a heartbeat is late on a loaded machine), the agent removes the
//   not-ready taint admission puts on a new Node itself.
// - Until a container first passes its readiness probe it is probed every
//   half second, not every periodSeconds: a kubelet's wait would only slow
//   the tests.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createKubeClient, type GroupVersionResource, type KubeClient, type KubeWatch } from '../../src/store/kube-client.ts';
import type { ControlPlane } from './control-plane.ts';
import { signServingCert } from './pki.ts';
import { type PodContext, PodNotStartable, PodResolver, pullImage, spawnContainer, writePodEtc } from './pod-sandbox.ts';
import { descendants } from './process-tree.ts';
import { type ServiceProxy, startServiceProxy } from './service-proxy.ts';

const NODES: GroupVersionResource = { group: '', version: 'v1', resource: 'nodes' };
const PODS: GroupVersionResource = { group: '', version: 'v1', resource: 'pods' };

export interface NodeAgentOptions {
  controlPlane: ControlPlane;
  /** One of NODE_NAMES (pki.ts): its token is this node's identity. */
  nodeName?: string;
  /** Images that run this checkout's bin/flint.js; by default any image whose repository is named `flint`. */
  isFlintImage?: (image: string) => boolean;
  /** Containers' output and the agent's own notes, line by line. */
  log?: (line: string) => void;
}

export interface NodeAgent {
  nodeName: string;
  /** Pods running here, as `<namespace>/<name>`. */
  pods(): string[];
  /** Where a Service is reached from this machine (its pods use its DNS name): `<loopback address>:<port>`. */
  serviceAddress(namespace: string, name: string, port: number): string | undefined;
  /** Kills a pod's containers behind the API server's back: a crash, which restartPolicy then answers. */
  crash(namespace: string, name: string): Promise<void>;
  stop(): Promise<void>;
}

interface ContainerState {
  spec: any;
  child?: ChildProcess;
  startedAt?: string;
  ready: boolean;
  /** Readiness has been seen once: probe at periodSeconds from then on. */
  everReady: boolean;
  restartCount: number;
  livenessFailures: number;
  /** Readiness probes failed (or passed) in a row: the Ready condition flips only at failureThreshold (successThreshold). */
  readinessFailures: number;
  readinessSuccesses: number;
  lastExit?: { exitCode: number; reason: string; finishedAt: string };
  /** Waiting for a restart after a crash. */
  waiting?: string;
  output: { chunks: string[]; size: number; followers: Set<ServerResponse> };
  nextProbe: number;
  nextLiveness: number;
}

interface RunningPod {
  key: string;
  uid: string;
  pod: any;
  ip: string;
  dir: string;
  containers: Map<string, ContainerState>;
  volumes: Map<string, string>;
  envs: Map<string, Record<string, string>>;
  terminating: boolean;
  statusWritten: string;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
  startTime: string;
}

// Pod IPs: a block per node agent, from the process id so that test files running at once do not collide.
let ipBlockSeq = 0;
const MAX_LOG_BYTES = 4 << 20;

function killTree(child: ChildProcess | undefined, signal: NodeJS.Signals): void {
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  const tree = [child.pid, ...descendants(child.pid)];
  // SIGTERM goes to the container's own processes only: a bwrap that gets it exits at once, and its sandbox dies with
  // it (--die-with-parent), so the program would never get to finish. bwrap exits when they do. SIGKILL: every one.
  const isBwrap = (pid: number) => {
    try {
      return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'bwrap';
    } catch {
      return false;
    }
  };
  for (const pid of signal === 'SIGKILL' ? tree : tree.filter((p) => !isBwrap(p))) {
    try {
      process.kill(pid, signal);
    } catch {}
  }
}

function portOf(container: any, port: number | string): number {
  if (typeof port === 'number') return port;
  const named = (container.ports ?? []).find((p: any) => p.name === port);
  if (!named) throw new Error(`probe port '${port}' names no port of container ${container.name}`);
  return named.containerPort;
}

async function probe(container: any, ip: string, p: any): Promise<boolean> {
  const timeoutMs = (p.timeoutSeconds ?? 1) * 1000;
  try {
    if (p.httpGet) {
      const res = await fetch(`http://${ip}:${portOf(container, p.httpGet.port)}${p.httpGet.path ?? '/'}`, { signal: AbortSignal.timeout(timeoutMs) });
      await res.body?.cancel();
      return res.status >= 200 && res.status < 400;
    }
    if (p.tcpSocket) {
      const net = await import('node:net');
      return await new Promise<boolean>((resolve) => {
        const s = net.connect({ host: ip, port: portOf(container, p.tcpSocket.port), timeout: timeoutMs });
        const settle = (ok: boolean) => {
          s.destroy();
          resolve(ok);
        };
        s.once('connect', () => settle(true));
        s.once('error', () => settle(false));
        s.once('timeout', () => settle(false));
      });
    }
  } catch {
    return false;
  }
  // exec probes need a runtime to exec into: counted as passing.
  return true;
}

export async function startNodeAgent(o: NodeAgentOptions): Promise<NodeAgent> {
  const cp = o.controlPlane;
  const nodeName = o.nodeName ?? 'flint-node-0';
  const token = cp.pki.nodeTokens[nodeName];
  if (!token) throw new Error(`no identity for node '${nodeName}': use one of ${Object.keys(cp.pki.nodeTokens).join(', ')}`);
  const client: KubeClient = createKubeClient({ baseUrl: cp.url, token, ca: cp.pki.ca });
  const log = o.log ?? (() => {});
  const isFlintImage = o.isFlintImage ?? ((image: string) => /(^|\/)flint(:[^/]*)?$/.test(image.replace(/@sha256:.*$/, '')));
  const api = new URL(cp.url);
  const ctx: PodContext = { client, isFlintImage, apiServer: { host: api.hostname, port: Number(api.port) }, nodeName, node: fs.realpathSync(process.execPath) };
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `flint-${nodeName}-`));
  const block = 30 + ((process.pid * 7 + ipBlockSeq++ * 13) % 200);
  let nextIp = 1;
  const running = new Map<string, RunningPod>();
  let stopped = false;
  const etcOf = (rp: RunningPod) => path.join(rp.dir, 'etc');
  const writeEtc = (rp: RunningPod) => writePodEtc(etcOf(rp), rp.pod, rp.ip, proxy.hosts(rp.pod.metadata.namespace));
  const proxy: ServiceProxy = startServiceProxy({
    client: createKubeClient({ baseUrl: cp.url, token: cp.pki.proxyToken, ca: cp.pki.ca }),
    block,
    pods: () =>
      [...running.values()].map((rp) => ({
        pod: rp.pod,
        ip: rp.ip,
        ready: rp.phase === 'Running' && [...rp.containers.values()].every((c) => c.ready),
        terminating: rp.terminating || Boolean(rp.pod.metadata.deletionTimestamp),
      })),
    log,
    onChange: () => {
      for (const rp of running.values()) {
        try {
          if (!rp.terminating) writeEtc(rp);
        } catch (err) {
          log(`[${nodeName}] ${rp.key}: writing /etc/hosts: ${(err as Error).message}`);
        }
      }
    },
  });

  // ---- logs over HTTPS, for the API server's pods/log proxy (client certificate required) ----
  const serving = await signServingCert(cp.pki, nodeName, '127.0.0.1');
  const server = https.createServer({ cert: serving.cert, key: serving.key, ca: cp.pki.ca, requestCert: true, rejectUnauthorized: true }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://node');
    const m = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    const rp = m ? running.get(`${decodeURIComponent(m[1])}/${decodeURIComponent(m[2])}`) : undefined;
    const c = m ? rp?.containers.get(decodeURIComponent(m[3])) : undefined;
    if (!c) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no such container on this node\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    for (const chunk of c.output.chunks) res.write(chunk);
    const follow = url.searchParams.get('follow') === 'true';
    if (!follow || !c.child) {
      res.end();
      return;
    }
    c.output.followers.add(res);
    res.on('close', () => c.output.followers.delete(res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const logPort = (server.address() as AddressInfo).port;

  // ---- the Node ----
  const capacity = { cpu: String(os.availableParallelism()), memory: `${Math.floor(os.totalmem() / 1024)}Ki`, pods: '110', 'ephemeral-storage': '20Gi' };
  const nodeStatus = () => ({
    capacity,
    allocatable: capacity,
    conditions: [
      { type: 'Ready', status: 'True', reason: 'FlintNodeAgentReady', message: 'the Flint node agent runs pods as sandboxed processes', lastHeartbeatTime: new Date().toISOString(), lastTransitionTime: new Date().toISOString() },
    ],
    addresses: [
      { type: 'InternalIP', address: '127.0.0.1' },
      { type: 'Hostname', address: nodeName },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: logPort } },
    nodeInfo: {
      architecture: process.arch === 'x64' ? 'amd64' : process.arch,
      operatingSystem: 'linux',
      kernelVersion: os.release(),
      osImage: 'Flint node agent',
      containerRuntimeVersion: 'bubblewrap://',
      kubeletVersion: 'v1.34.4',
      kubeProxyVersion: '',
      machineID: '',
      systemUUID: '',
      bootID: '',
    },
  });
  const existing = await client.get<any>(NODES, undefined, nodeName);
  if (!existing) {
    await client.create(NODES, undefined, { apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName, 'kubernetes.io/os': 'linux' } } } as any);
  }
  for (let attempt = 0; ; attempt++) {
    const current = await client.get<any>(NODES, undefined, nodeName);
    try {
      await client.replaceStatus(NODES, undefined, nodeName, { ...current, status: nodeStatus() });
      const fresh = await client.get<any>(NODES, undefined, nodeName);
      const taints = (fresh.spec.taints ?? []).filter((t: any) => !t.key.startsWith('node.kubernetes.io/not-ready') && !t.key.startsWith('node.kubernetes.io/unreachable'));
      if (taints.length !== (fresh.spec.taints ?? []).length) await client.replace(NODES, undefined, nodeName, { ...fresh, spec: { ...fresh.spec, taints } });
      break;
    } catch (err) {
      if ((err as { code?: string }).code !== 'FLINT_ERR_CONFLICT' || attempt > 5) throw err;
    }
  }
  log(`[${nodeName}] registered; logs on 127.0.0.1:${logPort}`);

  // ---- pod status ----
  function containerStatus(rp: RunningPod, c: ContainerState): Record<string, unknown> {
    const state = c.waiting
      ? { waiting: { reason: c.waiting } }
      : c.child && c.child.exitCode === null && c.child.signalCode === null
        ? { running: { startedAt: c.startedAt } }
        : c.lastExit
          ? { terminated: { ...c.lastExit, startedAt: c.startedAt } }
          : { waiting: { reason: 'ContainerCreating' } };
    return {
      name: c.spec.name,
      image: c.spec.image,
      imageID: '',
      containerID: c.child?.pid ? `bubblewrap://${rp.uid}/${c.child.pid}` : undefined,
      ready: c.ready,
      started: Boolean(state.running),
      restartCount: c.restartCount,
      state,
      ...(c.lastExit && c.restartCount > 0 ? { lastState: { terminated: c.lastExit } } : {}),
    };
  }

  async function writeStatus(rp: RunningPod, extra: { reason?: string; message?: string } = {}): Promise<void> {
    const all = [...rp.containers.values()];
    const ready = rp.phase === 'Running' && all.every((c) => c.ready);
    const status = {
      phase: rp.phase,
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      ...(rp.phase === 'Pending' ? {} : { podIP: rp.ip, podIPs: [{ ip: rp.ip }] }),
      startTime: rp.startTime,
      ...extra,
      conditions: [
        { type: 'PodScheduled', status: 'True' },
        { type: 'Initialized', status: 'True' },
        { type: 'ContainersReady', status: ready ? 'True' : 'False' },
        { type: 'Ready', status: ready ? 'True' : 'False' },
      ],
      containerStatuses: all.map((c) => containerStatus(rp, c)),
    };
    const digest = JSON.stringify({ ...status, containerStatuses: status.containerStatuses.map((s: any) => ({ ...s, state: Object.keys(s.state)[0] })) });
    if (digest === rp.statusWritten) return;
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await client.get<any>(PODS, rp.pod.metadata.namespace, rp.pod.metadata.name);
      if (!current || current.metadata.uid !== rp.uid) return;
      // Transition times move only when a condition changes, as the Deployment controller's availability reads them.
      const previous = new Map<string, any>((current.status?.conditions ?? []).map((c: any) => [c.type, c]));
      const now = new Date().toISOString();
      const conditions = status.conditions.map((c) => ({ ...c, lastTransitionTime: previous.get(c.type)?.status === c.status ? (previous.get(c.type)?.lastTransitionTime ?? now) : now }));
      try {
        // qosClass is set by the API server when the pod is made, and immutable.
        await client.replaceStatus(PODS, rp.pod.metadata.namespace, rp.pod.metadata.name, { ...current, status: { ...status, conditions, qosClass: current.status?.qosClass } });
        rp.statusWritten = digest;
        return;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'FLINT_ERR_NOT_FOUND') return;
        if (code !== 'FLINT_ERR_CONFLICT') throw err;
      }
    }
  }

  // ---- containers ----
  function startContainer(rp: RunningPod, c: ContainerState): void {
    c.waiting = undefined;
    c.ready = false;
    c.livenessFailures = 0;
    c.readinessFailures = 0;
    c.readinessSuccesses = 0;
    const tag = `[${rp.pod.metadata.name}/${c.spec.name}]`;
    const { child, startedAt } = spawnContainer(ctx, rp.pod, c.spec, rp.envs.get(c.spec.name) ?? {}, rp.volumes, etcOf(rp), (text) => {
      log(`${tag} ${text.trimEnd()}`);
      c.output.chunks.push(text);
      c.output.size += text.length;
      while (c.output.size > MAX_LOG_BYTES && c.output.chunks.length > 1) c.output.size -= (c.output.chunks.shift() as string).length;
      for (const f of c.output.followers) f.write(text);
    });
    c.child = child;
    c.startedAt = startedAt;
    c.nextProbe = Date.now();
    c.nextLiveness = Date.now() + (c.spec.livenessProbe?.initialDelaySeconds ?? 0) * 1000;
    child.on('close', (code, signal) => {
      if (c.child !== child) return;
      c.ready = false;
      c.lastExit = { exitCode: code ?? 128 + (signal ? (os.constants.signals[signal] ?? 9) : 0), reason: code === 0 ? 'Completed' : 'Error', finishedAt: new Date().toISOString() };
      if (rp.terminating || stopped) return;
      const policy = rp.pod.spec.restartPolicy ?? 'Always';
      if (policy === 'Always' || (policy === 'OnFailure' && code !== 0)) {
        // CrashLoopBackOff: 1 s, doubling, at most 30 s.
        c.waiting = 'CrashLoopBackOff';
        const delay = Math.min(30_000, 1000 * 2 ** Math.min(c.restartCount, 5));
        log(`${tag} exited (${c.lastExit.exitCode}); restarting in ${delay / 1000} s`);
        setTimeout(() => {
          if (rp.terminating || stopped || running.get(rp.key) !== rp) return;
          c.restartCount++;
          try {
            startContainer(rp, c);
          } catch (err) {
            log(`${tag} restart failed: ${(err as Error).message}`);
          }
          queue(rp.key, () => writeStatus(rp));
        }, delay).unref();
      } else if ([...rp.containers.values()].every((x) => x.child && (x.child.exitCode !== null || x.child.signalCode !== null))) {
        rp.phase = [...rp.containers.values()].every((x) => x.lastExit?.exitCode === 0) ? 'Succeeded' : 'Failed';
      }
      for (const f of c.output.followers) f.end();
      c.output.followers.clear();
      queue(rp.key, () => writeStatus(rp));
    });
  }

  /** Pods that could not start, retried with backoff (a kubelet's sync loop): the newest object seen, and the timer. */
  const retries = new Map<string, { uid: string; attempts: number; pod: any; startTime: string; timer?: NodeJS.Timeout }>();

  async function startPod(pod: any): Promise<void> {
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const retry = retries.get(key)?.uid === pod.metadata.uid ? retries.get(key) : undefined;
    const ip = `127.${block}.${Math.floor(nextIp / 250) % 250}.${(nextIp % 250) + 1}`;
    nextIp++;
    const dir = fs.mkdtempSync(path.join(root, `${pod.metadata.name}-`));
    const rp: RunningPod = {
      key,
      uid: pod.metadata.uid,
      pod,
      ip,
      dir,
      containers: new Map(),
      volumes: new Map(),
      envs: new Map(),
      terminating: false,
      statusWritten: '',
      phase: 'Pending',
      startTime: retry?.startTime ?? new Date().toISOString(),
    };
    for (const spec of pod.spec.containers) {
      rp.containers.set(spec.name, { spec, ready: false, everReady: false, restartCount: 0, livenessFailures: 0, readinessFailures: 0, readinessSuccesses: 0, output: { chunks: [], size: 0, followers: new Set() }, nextProbe: 0, nextLiveness: 0 });
    }
    running.set(key, rp);
    try {
      // Everything a container needs is read before any starts: a missing Secret leaves the pod waiting, as a kubelet does.
      const resolver = new PodResolver(ctx, pod, ip);
      rp.volumes = await resolver.volumes(dir);
      for (const spec of pod.spec.containers) rp.envs.set(spec.name, await resolver.env(spec));
      for (const spec of pod.spec.containers) await pullImage(ctx, spec.image);
      writeEtc(rp);
      for (const c of rp.containers.values()) startContainer(rp, c);
      rp.phase = 'Running';
      clearTimeout(retry?.timer);
      retries.delete(key);
      await writeStatus(rp);
    } catch (err) {
      // Tried again after a backoff (1 s, doubling, at most 30 s); the status says why meanwhile.
      running.delete(key);
      const next = { uid: pod.metadata.uid, attempts: (retry?.attempts ?? 0) + 1, pod, startTime: rp.startTime, timer: undefined as NodeJS.Timeout | undefined };
      next.timer = setTimeout(() => queue(key, async () => {
        const latest = retries.get(key);
        if (latest !== next || running.has(key)) return;
        await startPod(latest.pod);
      }), Math.min(30_000, 1000 * 2 ** Math.min(next.attempts - 1, 5)));
      next.timer.unref();
      retries.set(key, next);
      for (const c of rp.containers.values()) killTree(c.child, 'SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
      const reason = err instanceof PodNotStartable ? err.reason : 'CreateContainerError';
      log(`[${nodeName}] pod ${key} cannot start: ${(err as Error).message}`);
      for (const c of rp.containers.values()) c.waiting = reason;
      await writeStatus(rp, { reason, message: (err as Error).message }).catch(() => {});
    }
  }

  async function halt(rp: RunningPod, graceSeconds: number): Promise<void> {
    rp.terminating = true;
    const alive = () => [...rp.containers.values()].filter((c) => c.child && c.child.exitCode === null && c.child.signalCode === null);
    const gone = Promise.all(alive().map((c) => new Promise((r) => c.child?.once('close', r))));
    for (const c of alive()) killTree(c.child, 'SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([gone, new Promise((r) => (timer = setTimeout(r, graceSeconds * 1000)))]);
    clearTimeout(timer);
    for (const c of alive()) killTree(c.child, 'SIGKILL');
    await Promise.race([gone, new Promise((r) => setTimeout(r, 2000))]);
    for (const c of rp.containers.values()) {
      c.child?.stdout?.destroy();
      c.child?.stderr?.destroy();
      for (const f of c.output.followers) f.end();
      c.output.followers.clear();
    }
    fs.rmSync(rp.dir, { recursive: true, force: true });
  }

  /** Graceful deletion's last step, a kubelet's: the pod's processes are gone, so the object goes at once. */
  async function finishDeletion(pod: any): Promise<void> {
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    clearTimeout(retries.get(key)?.timer);
    retries.delete(key);
    const rp = running.get(key);
    if (rp && !rp.terminating) {
      await halt(rp, Math.min(pod.metadata.deletionGracePeriodSeconds ?? pod.spec.terminationGracePeriodSeconds ?? 30, 30));
      running.delete(key);
    }
    try {
      await client.delete(PODS, pod.metadata.namespace, pod.metadata.name, { uid: pod.metadata.uid, gracePeriodSeconds: 0 });
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code !== 'FLINT_ERR_CONFLICT' && code !== 'FLINT_ERR_NOT_FOUND') throw err;
    }
  }

  // One task at a time per pod, in order; pods do not wait on each other.
  const chains = new Map<string, Promise<void>>();
  function queue(key: string, task: () => Promise<void>): void {
    const next = (chains.get(key) ?? Promise.resolve())
      .then(() => (stopped ? undefined : task()))
      .catch((err) => log(`[${nodeName}] ${key}: ${(err as Error).message}`))
      .finally(() => {
        if (chains.get(key) === next) chains.delete(key);
      });
    chains.set(key, next);
  }

  function onPod(type: string, pod: any): void {
    if (pod.spec?.nodeName !== nodeName) return;
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    if (type === 'DELETED') {
      clearTimeout(retries.get(key)?.timer);
      retries.delete(key);
      queue(key, async () => {
        const rp = running.get(key);
        if (rp && rp.uid === pod.metadata.uid) {
          running.delete(key);
          await halt(rp, 0);
        }
      });
      return;
    }
    // A deleted pod leaves its Services at once, as the EndpointSlice controller takes it out before the kubelet acts.
    const known = running.get(key);
    if (known && known.uid === pod.metadata.uid && pod.metadata.deletionTimestamp) known.pod = { ...pod, spec: known.pod.spec };
    queue(key, async () => {
      const rp = running.get(key);
      if (rp && rp.uid !== pod.metadata.uid) {
        // A new pod of the same name (a StatefulSet's): the old one's processes go first.
        running.delete(key);
        await halt(rp, 0);
      }
      if (pod.metadata.deletionTimestamp) return finishDeletion(pod);
      const current = running.get(key);
      if (current) {
        current.pod = { ...pod, spec: current.pod.spec };
        return;
      }
      const waiting = retries.get(key);
      if (waiting && waiting.uid === pod.metadata.uid) {
        // Its backoff timer starts it; its own status writes must not.
        waiting.pod = pod;
        return;
      }
      if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return;
      await startPod(pod);
    });
  }

  // ---- the pod watch (list, then watch from its version; a 410 or a broken stream lists again) ----
  let watch: KubeWatch | undefined;
  const fieldSelector = `spec.nodeName=${nodeName}`;
  async function watchLoop(): Promise<void> {
    while (!stopped) {
      try {
        const list = await client.list<any>(PODS, undefined, { fieldSelector });
        const seen = new Set<string>();
        for (const p of list.items) {
          seen.add(`${p.metadata.namespace}/${p.metadata.name}`);
          onPod('ADDED', p);
        }
        // Deleted while no watch ran.
        for (const [key, rp] of running) if (!seen.has(key)) onPod('DELETED', rp.pod);
        let version = list.metadata.resourceVersion ?? '0';
        while (!stopped) {
          watch = client.watch<any>(PODS, undefined, { resourceVersion: version, timeoutSeconds: 300, fieldSelector }, (ev) => {
            if (ev.object?.metadata?.resourceVersion) version = ev.object.metadata.resourceVersion;
            if (ev.type !== 'BOOKMARK') onPod(ev.type, ev.object);
          });
          await watch.done;
        }
      } catch (err) {
        if (stopped) return;
        const code = (err as { code?: string }).code;
        if (code !== 'FLINT_ERR_GONE') log(`[${nodeName}] pod watch: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, code === 'FLINT_ERR_GONE' ? 0 : 1000));
      }
    }
  }
  const watching = watchLoop();

  // ---- probes ----
  let probing = false;
  const prober = setInterval(async () => {
    if (probing || stopped) return;
    probing = true;
    try {
      const now = Date.now();
      await Promise.all(
        [...running.values()].map(async (rp) => {
          if (rp.terminating || rp.phase !== 'Running') return;
          let changed = false;
          for (const c of rp.containers.values()) {
            const up = c.child && c.child.exitCode === null && c.child.signalCode === null;
            if (!up) continue;
            const rp_ = c.spec.readinessProbe;
            if (now >= c.nextProbe) {
              const ok = rp_ ? await probe(c.spec, rp.ip, rp_) : true;
              c.nextProbe = now + (c.everReady ? (rp_?.periodSeconds ?? 10) * 1000 : 500);
              if (ok) c.everReady = true;
              c.readinessFailures = ok ? 0 : c.readinessFailures + 1;
              c.readinessSuccesses = ok ? c.readinessSuccesses + 1 : 0;
              // As a kubelet: a ready container turns unready after failureThreshold failures in a row, an unready one
              // ready after successThreshold passes.
              const ready = c.ready ? c.readinessFailures < (rp_?.failureThreshold ?? 3) : c.readinessSuccesses >= (rp_?.successThreshold ?? 1);
              if (ready !== c.ready) {
                c.ready = ready;
                changed = true;
              }
            }
            const lp = c.spec.livenessProbe;
            if (lp && c.everReady && now >= c.nextLiveness) {
              c.nextLiveness = now + (lp.periodSeconds ?? 10) * 1000;
              if (await probe(c.spec, rp.ip, lp)) c.livenessFailures = 0;
              else if (++c.livenessFailures >= (lp.failureThreshold ?? 3)) {
                log(`[${rp.pod.metadata.name}/${c.spec.name}] liveness probe failed ${c.livenessFailures} times: restarting it`);
                killTree(c.child, 'SIGKILL');
              }
            }
          }
          if (changed) queue(rp.key, () => writeStatus(rp));
        }),
      );
    } finally {
      probing = false;
    }
  }, 250);

  // A test process that ends without stop() must not leave pods running behind it.
  const killAll = () => {
    for (const rp of running.values()) for (const c of rp.containers.values()) killTree(c.child, 'SIGKILL');
  };
  process.on('exit', killAll);

  return {
    nodeName,
    pods: () => [...running.keys()],
    serviceAddress(namespace, name, port) {
      const a = proxy.address(namespace, name);
      return a && `${a}:${port}`;
    },
    async crash(namespace, name) {
      const rp = running.get(`${namespace}/${name}`);
      if (!rp) throw new Error(`no pod ${namespace}/${name} runs on ${nodeName}`);
      const gone = [...rp.containers.values()].map((c) => new Promise((r) => (c.child && c.child.exitCode === null && c.child.signalCode === null ? c.child.once('close', r) : r(undefined))));
      for (const c of rp.containers.values()) killTree(c.child, 'SIGKILL');
      await Promise.all(gone);
    },
    async stop() {
      stopped = true;
      clearInterval(prober);
      for (const r of retries.values()) clearTimeout(r.timer);
      watch?.close();
      await watching;
      await Promise.all([...chains.values()]);
      await Promise.all([...running.values()].map((rp) => halt(rp, 0)));
      running.clear();
      await proxy.stop();
      process.off('exit', killAll);
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
