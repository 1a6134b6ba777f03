// A real Kubernetes control plane on loopback: etcd, kube-apiserver (RBAC
// and the Node authorizer on, an audit log of every answer),
// kube-controller-manager and kube-scheduler, from the binary build.ts makes,
// with a throwaway PKI. Kubernetes-mode tests stand on it and `npm run kube`
// gives one to a user. There is no kube-proxy and no container runtime: a
// node agent (node-agent.ts) runs the pods.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent } from 'undici';
import { freePort } from '../local-brokers.ts';
import { ensureKube } from './build.ts';
import { makePki, type Pki } from './pki.ts';

export interface ControlPlaneOptions {
  /** Where PKI, etcd data, kubeconfigs and logs go; a fresh temporary directory by default. */
  dir?: string;
  /** Each component's output, line by line, for a failing test to show. */
  log?: (line: string) => void;
}

export interface ControlPlane {
  /** `https://127.0.0.1:<port>`. */
  url: string;
  /** The CA that signed the API server's certificate (PEM file). */
  caFile: string;
  /** A `system:masters` token: for setting things up, never for the code under test. */
  adminToken: string;
  /** A kubeconfig for that administrator. */
  kubeconfig: string;
  /** The API server's audit log: one JSON event per line, each answer with its status. */
  auditLog: string;
  pki: Pki;
  dir: string;
  /** Runs the bundled kubectl as the administrator. Rejects with its output on a non-zero exit. */
  kubectl(args: string[], opts?: { input?: string }): Promise<string>;
  /** Stops the API server and starts it again on the same port and data: watches break, the first requests get 429. */
  restartApiServer(): Promise<void>;
  stop(): Promise<void>;
}

interface Component {
  name: string;
  args: string[];
  child?: ChildProcess;
}

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  # The components' own leader leases and health checks say nothing about Flint.
  - level: None
    resources: [{ group: coordination.k8s.io, resources: [leases] }]
  - level: None
    nonResourceURLs: ['/healthz*', '/readyz*', '/livez*', '/version', '/openapi/*']
  - level: Metadata
`;

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number, failed?: () => string | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const why = failed?.();
    if (why) throw new Error(`${what}: ${why}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${Math.round(timeoutMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const bin = ensureKube();
  const dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'flint-kube-'));
  fs.mkdirSync(dir, { recursive: true });
  const log = opts.log ?? (() => {});
  const [etcdPort, peerPort, apiPort, cmPort, schedPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const url = `https://127.0.0.1:${apiPort}`;
  const pki = await makePki(path.join(dir, 'pki'), url);
  const auditPolicy = path.join(dir, 'audit-policy.yaml');
  fs.writeFileSync(auditPolicy, AUDIT_POLICY);
  const auditLog = path.join(dir, 'audit.log');
  const logs = path.join(dir, 'logs');
  fs.mkdirSync(logs, { recursive: true });

  const etcd: Component = {
    name: 'etcd',
    args: [
      '--name=flint',
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=flint=http://127.0.0.1:${peerPort}`,
      // A throwaway cluster: durability is not worth an fsync per write on a shared disk.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ],
  };
  const apiserver: Component = {
    name: 'kube-apiserver',
    args: [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      '--advertise-address=127.0.0.1',
      // No kube-proxy: the `kubernetes` Service's endpoints would point nowhere useful.
      '--endpoint-reconciler-type=none',
      `--tls-cert-file=${pki.serverCert}`,
      `--tls-private-key-file=${pki.serverKey}`,
      `--client-ca-file=${pki.caCert}`,
      `--kubelet-certificate-authority=${pki.caCert}`,
      `--kubelet-client-certificate=${pki.kubeletClientCert}`,
      `--kubelet-client-key=${pki.kubeletClientKey}`,
      `--token-auth-file=${pki.tokenFile}`,
      `--service-account-key-file=${pki.saPublic}`,
      `--service-account-signing-key-file=${pki.saPrivate}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      '--authorization-mode=Node,RBAC',
      '--service-cluster-ip-range=10.96.0.0/16',
      '--allow-privileged=true',
      `--audit-policy-file=${auditPolicy}`,
      `--audit-log-path=${auditLog}`,
      '--audit-log-format=json',
      '--audit-log-mode=blocking',
      // The node agent serves logs on loopback; the API server reaches it by the node's InternalIP.
      '--kubelet-preferred-address-types=InternalIP',
      '--profiling=false',
    ],
  };
  const kubeconfigFlags = (kc: string) => [`--kubeconfig=${kc}`, `--authentication-kubeconfig=${kc}`, `--authorization-kubeconfig=${kc}`];
  const controllerManager: Component = {
    name: 'kube-controller-manager',
    args: [
      ...kubeconfigFlags(pki.kubeconfigs.controllerManager),
      '--bind-address=127.0.0.1',
      `--secure-port=${cmPort}`,
      '--leader-elect=false',
      `--service-account-private-key-file=${pki.saPrivate}`,
      `--root-ca-file=${pki.caCert}`,
      '--use-service-account-credentials=true',
      // Node lifecycle would taint and evict the node agent's pods whenever its heartbeat is late.
      '--controllers=*,-nodelifecycle',
      '--profiling=false',
    ],
  };
  const scheduler: Component = {
    name: 'kube-scheduler',
    args: [...kubeconfigFlags(pki.kubeconfigs.scheduler), '--bind-address=127.0.0.1', `--secure-port=${schedPort}`, '--leader-elect=false', '--profiling=false'],
  };

  let stopping = false;
  function start(c: Component): void {
    const out = fs.openSync(path.join(logs, `${c.name}.log`), 'a');
    const child = spawn(bin, [c.name, ...c.args], { stdio: ['ignore', out, out], cwd: dir });
    fs.closeSync(out);
    c.child = child;
    child.on('exit', (code, signal) => {
      if (!stopping && c.child === child) log(`[${c.name}] exited (${signal ?? code}); its log: ${path.join(logs, `${c.name}.log`)}`);
    });
  }
  const exited = (c: Component) => () => {
    const ch = c.child;
    if (!ch || (ch.exitCode === null && ch.signalCode === null)) return undefined;
    const tail = fs.readFileSync(path.join(logs, `${c.name}.log`), 'utf8').split('\n').slice(-15).join('\n');
    return `${c.name} exited (${ch.signalCode ?? ch.exitCode}):\n${tail}`;
  };
  async function halt(c: Component): Promise<void> {
    const ch = c.child;
    if (!ch || ch.exitCode !== null || ch.signalCode !== null) return;
    const gone = new Promise((r) => ch.once('exit', r));
    ch.kill('SIGTERM');
    const timer = setTimeout(() => ch.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(timer);
  }
  const all = [scheduler, controllerManager, apiserver, etcd];
  const killAll = () => {
    for (const c of all) c.child?.kill('SIGKILL');
  };
  process.on('exit', killAll);

  const kubectl = (args: string[], o: { input?: string } = {}) =>
    new Promise<string>((resolve, reject) => {
      const child = execFile(bin, ['kubectl', `--kubeconfig=${pki.kubeconfigs.admin}`, ...args], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`kubectl ${args.join(' ')}: ${stderr || err.message}`));
        else resolve(stdout);
      });
      if (o.input !== undefined) child.stdin?.end(o.input);
    });
  const dispatcher = new Agent({ connect: { ca: pki.ca } });
  const readyz = async () => {
    const r = await fetch(`${url}/readyz`, { headers: { authorization: `Bearer ${pki.adminToken}` }, dispatcher } as RequestInit);
    await r.body?.cancel();
    return r.status === 200;
  };
  const startApiServer = async () => {
    start(apiserver);
    await until('kube-apiserver ready', readyz, 120_000, exited(apiserver));
  };

  try {
    start(etcd);
    await until(
      'etcd ready',
      async () => {
        const r = await fetch(`http://127.0.0.1:${etcdPort}/health`);
        return r.status === 200 && ((await r.json()) as { health?: string }).health === "true";
      },
      60_000,
      exited(etcd),
    );
    await startApiServer();
    start(controllerManager);
    start(scheduler);
    // The default namespace's service account is made by the controller manager: pods need it.
    await until('the default ServiceAccount', async () => (await kubectl(['get', 'serviceaccount', 'default', '-o', 'name'])).trim() !== '', 60_000, exited(controllerManager));
  } catch (err) {
    stopping = true;
    for (const c of all) await halt(c);
    process.off('exit', killAll);
    throw err;
  }
  log(`[kube] control plane ready at ${url} (${dir})`);

  return {
    url,
    caFile: pki.caCert,
    adminToken: pki.adminToken,
    kubeconfig: pki.kubeconfigs.admin,
    auditLog,
    pki,
    dir,
    kubectl,
    async restartApiServer() {
      await halt(apiserver);
      await startApiServer();
    },
    async stop() {
      stopping = true;
      for (const c of all) await halt(c);
      process.off('exit', killAll);
      await dispatcher.close();
      if (!opts.dir) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
