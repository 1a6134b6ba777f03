// A stand-in for the parts of a cluster that run things, beside the fake API
// server: a Deployment controller (each Deployment keeps `replicas` pods
// matching its selector, so a pod relabelled out of it is replaced, and
// replaces pods of an older template at once; like the real one it writes
// the Deployment's status, so the Deployment's version moves under anyone
// who replaces it from an older read) and a
// kubelet that runs each pod's containers as real processes. Each pod gets
// its own loopback address (127.a.b.c) for its IP, since pods here share the
// host's network: every container of the pod gets FLINT_HOST (and
// FLINT_ENV_URL, the environment container's address) in place of a network
// namespace. Containers run under bubblewrap with the pod's volumes mounted
// where the pod spec says (/userfunc, /secrets, /configs), so a path the
// executor sends means the same thing it would in a cluster. Images map to
// this checkout: an environment image to its runtime, the fetcher image to
// bin/flint.js. Pods become Ready when their readiness probe answers.
// Containers' output is kept per container and served as the pods' logs.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runtimeForImage } from '../../src/api/images.ts';
import { runtimeLaunch } from '../../src/runtimes/index.ts';
import { BWRAP, bwrapArgs, SANDBOX_PATHS, sandboxBinaryPath } from '../../src/sandbox/bwrap.ts';
import { descendants } from '../../scripts/kube/process-tree.ts';
import type { GroupVersionResource, KubeClient, KubeObject } from '../../src/store/kube-client.ts';
import type { FakeResource, PodLogSource } from './server.ts';

/** Some of what the real API server fills into a pod spec it stores: enough that the stored one never equals the one sent. */
function defaultPodSpec(spec: any): void {
  spec.restartPolicy ??= 'Always';
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.schedulerName ??= 'default-scheduler';
  spec.securityContext ??= {};
  spec.terminationGracePeriodSeconds ??= 30;
  for (const c of spec.containers ?? []) {
    c.terminationMessagePath ??= '/dev/termination-log';
    c.terminationMessagePolicy ??= 'File';
    c.imagePullPolicy ??= String(c.image).endsWith(':latest') || !String(c.image).includes(':') ? 'Always' : 'IfNotPresent';
    for (const p of c.ports ?? []) p.protocol ??= 'TCP';
    for (const probe of [c.readinessProbe, c.livenessProbe]) {
      if (!probe) continue;
      probe.timeoutSeconds ??= 1;
      probe.successThreshold ??= 1;
      probe.failureThreshold ??= 3;
      probe.periodSeconds ??= 10;
      if (probe.httpGet) probe.httpGet.scheme ??= 'HTTP';
    }
  }
}

export const DEPLOYMENT_RESOURCE: FakeResource = {
  group: 'apps',
  version: 'v1',
  resource: 'deployments',
  kind: 'Deployment',
  statusSubresource: true,
  defaults(d) {
    d.spec.strategy ??= { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } };
    d.spec.revisionHistoryLimit ??= 10;
    d.spec.progressDeadlineSeconds ??= 600;
    d.spec.template.metadata ??= {};
    d.spec.template.metadata.creationTimestamp ??= null;
    defaultPodSpec(d.spec.template.spec);
  },
};
export const POD_RESOURCE: FakeResource = { group: '', version: 'v1', resource: 'pods', kind: 'Pod', statusSubresource: true };
export const SERVICE_RESOURCE: FakeResource = { group: '', version: 'v1', resource: 'services', kind: 'Service' };
export { NAMESPACE_RESOURCE } from './server.ts';

const DEPLOYMENTS: GroupVersionResource = { group: 'apps', version: 'v1', resource: 'deployments' };
const PODS: GroupVersionResource = { group: '', version: 'v1', resource: 'pods' };
const SECRETS: GroupVersionResource = { group: '', version: 'v1', resource: 'secrets' };

/** The template a pod was made from, as a ReplicaSet's pod-template-hash tells. */
const TEMPLATE_HASH = 'fake.kube/template-hash';
const PROJECT = path.resolve(import.meta.dirname, '..', '..');
const APP_DIR = '/flint/app';

export interface FakeKubeletOptions {
  client: KubeClient;
  /** The image the executor puts in pool pods beside the environment. */
  fetcherImage: string;
  /** Lines the containers print, for a failing test to show. */
  log?: (line: string) => void;
}

interface ContainerOutput {
  chunks: string[];
  followers: Set<{ write(text: string): void; end(): void }>;
  ended: boolean;
}

interface RunningPod {
  ns: string;
  name: string;
  ip: string;
  dir: string;
  children: ChildProcess[];
  ready: boolean;
  output: Map<string, ContainerOutput>;
}

export interface FakeKubelet {
  /** Pods being run, by `<namespace>/<name>`. */
  pods(): string[];
  /** The running pods' logs, for the fake API server (`setPodLogs`). */
  logs: PodLogSource;
  /** Kills a pod's containers without telling the API server: a crash. Settles once they are gone. */
  crash(namespace: string, name: string): Promise<void>;
  stop(): Promise<void>;
}

// Pod IPs: the second octet from the process id, so test files running at once in other processes do not collide;
// the rest counts up across every kubelet of this process.
const IP_BLOCK = 20 + (process.pid % 200);
let nextIp = 1;

/**
 * bwrap and everything under it. The sandbox's own init runs in a session of its own, and its --die-with-parent can
 * miss a bwrap killed while still setting up, so the processes are found and killed one by one.
 */
function killGroup(c: ChildProcess): void {
  if (c.pid === undefined || c.exitCode !== null || c.signalCode !== null) return;
  for (const pid of [c.pid, ...descendants(c.pid)]) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // ESRCH: already gone.
    }
  }
}

function matches(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);
}

export function startFakeKubelet(o: FakeKubeletOptions): FakeKubelet {
  const running = new Map<string, RunningPod>();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-kubelet-'));
  const node = fs.realpathSync(process.execPath);
  let stopped = false;
  let busy: Promise<void> = Promise.resolve();

  function containerCommand(container: any): { command: string[]; binds: Array<{ host: string; at: string }> } {
    if (container.image === o.fetcherImage) {
      return { command: [sandboxBinaryPath(node), path.posix.join(APP_DIR, 'bin', 'flint.js'), ...(container.args ?? [])], binds: [{ host: PROJECT, at: APP_DIR }] };
    }
    const runtime = runtimeForImage(container.image);
    const launch = runtime && runtimeLaunch(runtime);
    if (!launch || runtime !== 'node') throw new Error(`the fake kubelet runs no image '${container.image}'`);
    // The runtime's packages (ws) as a worker's sandbox binds them (launch.binds).
    return {
      command: launch.command(SANDBOX_PATHS.runtime, 128, sandboxBinaryPath),
      binds: [{ host: launch.dir, at: SANDBOX_PATHS.runtime }, ...(launch.binds?.(SANDBOX_PATHS.runtime) ?? [])],
    };
  }

  /** A container's environment, with `valueFrom.secretKeyRef` read from the Secret as a kubelet does. */
  async function containerEnv(ns: string, c: any): Promise<Record<string, string>> {
    const env: Record<string, string> = {};
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (!ref) {
        env[e.name] = e.value;
        continue;
      }
      const secret = await o.client.get<any>(SECRETS, ns, ref.name);
      const value = secret?.data?.[ref.key];
      if (value === undefined) throw new Error(`secret ${ns}/${ref.name} has no key ${ref.key} (CreateContainerConfigError)`);
      env[e.name] = Buffer.from(value, 'base64').toString('utf8');
    }
    return env;
  }

  async function startPod(pod: KubeObject): Promise<RunningPod> {
    const ns = pod.metadata.namespace as string;
    // Resolved before anything is made: a missing Secret leaves the pod waiting, as CreateContainerConfigError does.
    const envs = await Promise.all(((pod.spec as any).containers as any[]).map((c) => containerEnv(ns, c)));
    const ip = `127.${IP_BLOCK}.${Math.floor(nextIp / 250) % 250}.${(nextIp % 250) + 1}`;
    nextIp++;
    const dir = fs.mkdtempSync(path.join(root, `${pod.metadata.name}-`));
    const spec = pod.spec as any;
    const volumes = new Map<string, string>();
    for (const v of spec.volumes ?? []) {
      const host = path.join(dir, 'volumes', v.name);
      fs.mkdirSync(host, { recursive: true, mode: 0o777 });
      fs.chmodSync(host, 0o777);
      volumes.set(v.name, host);
    }
    const rp: RunningPod = { ns, name: pod.metadata.name, ip, dir, children: [], ready: false, output: new Map() };
    const envContainer = (spec.containers as any[]).find((c) => (c.ports ?? []).some((p: any) => p.containerPort === 8888));
    for (const [i, c] of (spec.containers as any[]).entries()) {
      const { command, binds } = containerCommand(c);
      const mounts = (c.volumeMounts ?? []).map((m: any) => ({ host: volumes.get(m.name) as string, at: m.mountPath, writable: !m.readOnly }));
      const args = bwrapArgs({ binds: [...binds, ...mounts], binaries: [node], tmpSizeBytes: 64 << 20, hostname: pod.metadata.name, chdir: '/tmp' }, command);
      // The fake cluster's pod network is the host's loopback (127.x addresses), so its pods, unlike
      // any function's sandbox, keep the host's network namespace.
      args.splice(args.indexOf('--unshare-all') + 1, 0, '--share-net');
      const env: Record<string, string> = { PATH: '/usr/bin:/bin', FLINT_HOST: ip, ...(envContainer ? { FLINT_ENV_URL: `http://${ip}:8888` } : {}) };
      Object.assign(env, envs[i]);
      const child = spawn(BWRAP, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
      const tag = `[${pod.metadata.name}/${c.name}]`;
      const output: ContainerOutput = { chunks: [], followers: new Set(), ended: false };
      rp.output.set(c.name, output);
      const capture = (d: Buffer) => {
        const text = String(d);
        o.log?.(`${tag} ${text.trimEnd()}`);
        output.chunks.push(text);
        for (const f of output.followers) f.write(text);
      };
      child.stdout?.on('data', capture);
      child.stderr?.on('data', capture);
      // 'close', not 'exit': output still buffered in the pipes arrives before it.
      child.on('close', () => {
        output.ended = true;
        for (const f of output.followers) f.end();
        output.followers.clear();
      });
      rp.children.push(child);
    }
    running.set(`${ns}/${pod.metadata.name}`, rp);
    return rp;
  }

  function killPod(rp: RunningPod): void {
    for (const c of rp.children) {
      killGroup(c);
      // Pipes held open by anything that outlived the kill must not keep the test process alive.
      c.stdout?.destroy();
      c.stderr?.destroy();
    }
    fs.rmSync(rp.dir, { recursive: true, force: true });
  }

  async function probeReady(pod: any, rp: RunningPod): Promise<boolean> {
    for (const c of pod.spec.containers) {
      const probe = c.readinessProbe?.httpGet;
      if (!probe) continue;
      try {
        const res = await fetch(`http://${rp.ip}:${probe.port}${probe.path}`, { signal: AbortSignal.timeout(1000) });
        await res.body?.cancel();
        if (res.status >= 400) return false;
      } catch {
        return false;
      }
    }
    return true;
  }

  async function reconcile(): Promise<void> {
    const deployments = (await o.client.list<any>(DEPLOYMENTS, undefined)).items;
    let pods = (await o.client.list<any>(PODS, undefined)).items;
    for (const d of deployments) {
      const ns = d.metadata.namespace;
      const selector = d.spec.selector?.matchLabels;
      const templateHash = createHash('sha256').update(JSON.stringify(d.spec.template)).digest('hex').slice(0, 10);
      let mine = pods.filter((p) => p.metadata.namespace === ns && matches(selector, p.metadata.labels));
      for (const stale of mine.filter((p) => p.metadata.annotations?.[TEMPLATE_HASH] !== templateHash)) await o.client.delete(PODS, ns, stale.metadata.name);
      mine = mine.filter((p) => p.metadata.annotations?.[TEMPLATE_HASH] === templateHash);
      const want = d.spec.replicas ?? 1;
      for (let i = mine.length; i < want; i++) {
        const template = d.spec.template;
        const name = `${d.metadata.name}-${randomBytes(3).toString('hex')}`;
        await o.client.create(PODS, ns, {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name,
            namespace: ns,
            labels: template.metadata?.labels,
            annotations: { ...template.metadata?.annotations, [TEMPLATE_HASH]: templateHash },
            ownerReferences: [{ kind: 'Deployment', name: d.metadata.name }],
          },
          spec: template.spec,
        });
      }
      // A ReplicaSet removes pods that are not ready first.
      const ready = (p: any) => (p.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
      const byPreference = [...mine].sort((a, b) => Number(ready(a)) - Number(ready(b)));
      for (const extra of byPreference.slice(0, Math.max(0, mine.length - want))) await o.client.delete(PODS, ns, extra.metadata.name);
      const status = { observedGeneration: d.metadata.generation, replicas: Math.min(mine.length, want), readyReplicas: mine.filter(ready).length };
      if (JSON.stringify(d.status ?? {}) !== JSON.stringify(status)) {
        await o.client.replaceStatus(DEPLOYMENTS, ns, d.metadata.name, { ...d, status }).catch(() => {});
      }
    }
    // Pods of a deleted Deployment go with it, as the garbage collector would take them; pool pods relabelled out of it
    // (managed=false) were released by it and stay.
    for (const p of pods) {
      const owner = p.metadata.ownerReferences?.[0]?.name;
      const owned = owner && deployments.some((d) => d.metadata.name === owner && d.metadata.namespace === p.metadata.namespace);
      if (owner && !owned && p.metadata.labels?.managed !== 'false') await o.client.delete(PODS, p.metadata.namespace, p.metadata.name);
    }
    pods = (await o.client.list<any>(PODS, undefined)).items;
    const alive = new Set(pods.map((p) => `${p.metadata.namespace}/${p.metadata.name}`));
    for (const [key, rp] of running) {
      if (alive.has(key)) continue;
      killPod(rp);
      running.delete(key);
    }
    for (const p of pods) {
      const key = `${p.metadata.namespace}/${p.metadata.name}`;
      const rp = running.get(key) ?? (await startPod(p));
      if (!p.status?.podIP) {
        await o.client.replaceStatus(PODS, p.metadata.namespace, p.metadata.name, { ...p, status: { phase: 'Running', podIP: rp.ip, conditions: [{ type: 'Ready', status: 'False' }] } });
        continue;
      }
      if (!rp.ready && (await probeReady(p, rp))) {
        rp.ready = true;
        const fresh = await o.client.get<any>(PODS, p.metadata.namespace, p.metadata.name);
        if (fresh) await o.client.replaceStatus(PODS, p.metadata.namespace, p.metadata.name, { ...fresh, status: { ...fresh.status, conditions: [{ type: 'Ready', status: 'True' }] } });
      }
    }
  }

  // A test process that ends without stop() (a failed hook, a timeout) must not leave pods running behind it.
  const killAll = () => {
    for (const rp of running.values()) for (const c of rp.children) killGroup(c);
  };
  process.on('exit', killAll);

  const timer = setInterval(() => {
    busy = busy.then(() => (stopped ? undefined : reconcile().catch((err) => o.log?.(`[kubelet] ${(err as Error).message}`))));
  }, 50);

  return {
    pods: () => [...running.keys()],
    logs(namespace, pod, container, follow, out) {
      const output = running.get(`${namespace}/${pod}`)?.output.get(container);
      if (!output) return undefined;
      for (const c of output.chunks) out.write(c);
      if (!follow || output.ended) return () => {};
      output.followers.add(out);
      return () => output.followers.delete(out);
    },
    async crash(namespace, name) {
      const rp = running.get(`${namespace}/${name}`);
      const gone = (rp?.children ?? []).map((c) => (c.exitCode !== null || c.signalCode !== null ? undefined : new Promise((r) => c.once('close', r))));
      for (const c of rp?.children ?? []) killGroup(c);
      await Promise.all(gone);
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      process.off('exit', killAll);
      await busy;
      for (const rp of running.values()) killPod(rp);
      running.clear();
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
