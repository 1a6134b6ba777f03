// One pod as a node agent runs it: its volumes made on disk (emptyDir,
// Secret, ConfigMap, and projected service-account tokens from the
// TokenRequest API, as a kubelet mounts them), its containers' environments
// resolved, and each container a sandboxed process under bubblewrap. Pods
// here share the host's network; each has its own loopback address as its
// IP, which its containers get as FLINT_HOST (and POD_IP through the
// downward API) to listen on.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { runtimeForImage } from '../../src/api/images.ts';
import { type RuntimeLaunch, runtimeLaunch } from '../../src/runtimes/index.ts';
import { BWRAP, bwrapArgs, SANDBOX_PATHS, sandboxBinaryPath } from '../../src/sandbox/bwrap.ts';
import type { GroupVersionResource, KubeClient } from '../../src/store/kube-client.ts';

const SECRETS: GroupVersionResource = { group: '', version: 'v1', resource: 'secrets' };
const CONFIGMAPS: GroupVersionResource = { group: '', version: 'v1', resource: 'configmaps' };
const SERVICE_ACCOUNTS: GroupVersionResource = { group: '', version: 'v1', resource: 'serviceaccounts' };
const PROJECT = path.resolve(import.meta.dirname, '..', '..');
const APP_DIR = '/flint/app';

/** Why a pod cannot start yet (a missing Secret): the kubelet's waiting reason and message. */
export class PodNotStartable extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.reason = reason;
  }
}

export interface PodContext {
  client: KubeClient;
  /** Images that run this checkout's `bin/flint.js` (the control plane, the fetcher). */
  isFlintImage(image: string): boolean;
  /** How containers reach the API server: there is no `kubernetes` Service without kube-proxy. */
  apiServer: { host: string; port: number };
  nodeName: string;
  node: string;
}

export interface ContainerCommand {
  command: string[];
  binds: Array<{ host: string; at: string }>;
  /** Host files the command runs besides /usr (the node binary, a runtime's compiled server), bound read-only. */
  binaries: string[];
}

/** The runtime an environment image runs here; PodNotStartable (ErrImagePull) for an image this agent cannot run. */
function imageLaunch(image: string): RuntimeLaunch {
  const runtime = runtimeForImage(image);
  const launch = runtime && runtimeLaunch(runtime);
  if (!launch) throw new PodNotStartable('ErrImagePull', `the node agent runs no image '${image}' (it runs Flint's image and the environments' runtime images)`);
  return launch;
}

/**
 * What a kubelet's image pull stands for here: the runtime an environment image names made ready on this machine
 * (the Go runtime's server compiled, python3 checked), before its containers start. Flint's image needs nothing.
 */
export async function pullImage(ctx: PodContext, image: string): Promise<void> {
  if (ctx.isFlintImage(image)) return;
  try {
    await imageLaunch(image).prepare?.();
  } catch (err) {
    if (err instanceof PodNotStartable) throw err;
    throw new PodNotStartable('ErrImagePull', `image '${image}': ${(err as Error).message}`);
  }
}

/** What an image runs: Flint's own image runs bin/flint.js with the container's args; an environment image its runtime. */
export function containerCommand(ctx: PodContext, container: any, env: Record<string, string>): ContainerCommand {
  const expand = (s: string) => s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name) => env[name] ?? m);
  if (ctx.isFlintImage(container.image)) {
    // The image's entrypoint is `flint`; a command, when given, names it again.
    const argv = [...(container.command ?? []), ...(container.args ?? [])].map(expand);
    if (container.command && /(^|\/)flint(\.js)?$/.test(argv[0] ?? '')) argv.shift();
    return {
      command: [sandboxBinaryPath(ctx.node), path.posix.join(APP_DIR, 'bin', 'flint.js'), ...argv],
      binds: [{ host: PROJECT, at: APP_DIR }, ...linkedModules()],
      binaries: [ctx.node],
    };
  }
  const launch = imageLaunch(container.image);
  return {
    command: launch.command(SANDBOX_PATHS.runtime, 128, sandboxBinaryPath),
    binds: [{ host: launch.dir, at: SANDBOX_PATHS.runtime }, ...(launch.binds?.(SANDBOX_PATHS.runtime) ?? [])],
    binaries: launch.binaries(),
  };
}

/** A checkout whose node_modules links elsewhere (a git worktree sharing one): the link's target, where the link expects it. */
function linkedModules(): Array<{ host: string; at: string }> {
  const link = path.join(PROJECT, 'node_modules');
  if (!fs.lstatSync(link, { throwIfNoEntry: false })?.isSymbolicLink()) return [];
  const target = path.resolve(PROJECT, fs.readlinkSync(link));
  return target.startsWith(`${PROJECT}${path.sep}`) ? [] : [{ host: fs.realpathSync(link), at: target }];
}

function decode(data: Record<string, string> | undefined): Record<string, Buffer> {
  return Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')]));
}

function textData(cm: any): Record<string, Buffer> {
  return { ...Object.fromEntries(Object.entries((cm.data ?? {}) as Record<string, string>).map(([k, v]) => [k, Buffer.from(v)])), ...decode(cm.binaryData) };
}

/** Writes `files` (key -> content, or the items' paths) under `dir`; a key that would leave it is refused. */
function writeFiles(dir: string, files: Record<string, Buffer>, items: Array<{ key: string; path: string }> | undefined, what: string): void {
  const wanted = items ?? Object.keys(files).map((key) => ({ key, path: key }));
  for (const { key, path: rel } of wanted) {
    const content = files[key];
    if (content === undefined) throw new PodNotStartable('CreateContainerConfigError', `${what} has no key '${key}'`);
    const target = path.resolve(dir, rel);
    if (!target.startsWith(`${dir}${path.sep}`)) throw new PodNotStartable('CreateContainerConfigError', `${what}: item path '${rel}' leaves the volume`);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, content, { mode: 0o644 });
  }
}

function fieldValue(pod: any, ip: string, fieldPath: string): string {
  switch (fieldPath) {
    case 'metadata.name':
      return pod.metadata.name;
    case 'metadata.namespace':
      return pod.metadata.namespace;
    case 'metadata.uid':
      return pod.metadata.uid;
    case 'spec.nodeName':
      return pod.spec.nodeName;
    case 'spec.serviceAccountName':
      return pod.spec.serviceAccountName ?? 'default';
    case 'status.podIP':
      return ip;
    case 'status.hostIP':
      return '127.0.0.1';
  }
  const label = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (label) return pod.metadata[label[1]]?.[label[2]] ?? '';
  throw new PodNotStartable('CreateContainerConfigError', `fieldRef '${fieldPath}' is not supported`);
}

export class PodResolver {
  readonly #ctx: PodContext;
  readonly #pod: any;
  readonly #ip: string;

  constructor(ctx: PodContext, pod: any, ip: string) {
    this.#ctx = ctx;
    this.#pod = pod;
    this.#ip = ip;
  }

  get #ns(): string {
    return this.#pod.metadata.namespace;
  }

  async #secret(name: string, optional: boolean): Promise<Record<string, Buffer> | undefined> {
    const s = await this.#ctx.client.get<any>(SECRETS, this.#ns, name);
    if (!s && !optional) throw new PodNotStartable('CreateContainerConfigError', `secret "${name}" not found`);
    return s ? decode(s.data) : undefined;
  }

  async #configMap(name: string, optional: boolean): Promise<Record<string, Buffer> | undefined> {
    const c = await this.#ctx.client.get<any>(CONFIGMAPS, this.#ns, name);
    if (!c && !optional) throw new PodNotStartable('CreateContainerConfigError', `configmap "${name}" not found`);
    return c ? textData(c) : undefined;
  }

  /** A bound service-account token for this pod, from the TokenRequest API, as a projected volume holds it. */
  async #token(source: { audience?: string; expirationSeconds?: number }): Promise<string> {
    const sa = this.#pod.spec.serviceAccountName ?? 'default';
    const answer = await this.#ctx.client.createSubresource<any>(SERVICE_ACCOUNTS, this.#ns, sa, 'token', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        audiences: source.audience ? [source.audience] : [],
        expirationSeconds: source.expirationSeconds ?? 3607,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: this.#pod.metadata.name, uid: this.#pod.metadata.uid },
      },
    });
    return answer.status.token;
  }

  /** Each volume made under `dir`, by name. */
  async volumes(dir: string): Promise<Map<string, string>> {
    const made = new Map<string, string>();
    for (const v of this.#pod.spec.volumes ?? []) {
      const host = path.join(dir, 'volumes', v.name);
      fs.mkdirSync(host, { recursive: true, mode: 0o777 });
      fs.chmodSync(host, 0o777);
      made.set(v.name, host);
      if (v.emptyDir) continue;
      if (v.secret) {
        const data = await this.#secret(v.secret.secretName, v.secret.optional === true);
        if (data) writeFiles(host, data, v.secret.items, `secret "${v.secret.secretName}"`);
      } else if (v.configMap) {
        const data = await this.#configMap(v.configMap.name, v.configMap.optional === true);
        if (data) writeFiles(host, data, v.configMap.items, `configmap "${v.configMap.name}"`);
      } else if (v.projected) {
        for (const s of v.projected.sources ?? []) {
          if (s.serviceAccountToken) writeFiles(host, { token: Buffer.from(await this.#token(s.serviceAccountToken)) }, [{ key: 'token', path: s.serviceAccountToken.path }], 'token');
          else if (s.configMap) {
            const data = await this.#configMap(s.configMap.name, s.configMap.optional === true);
            if (data) writeFiles(host, data, s.configMap.items, `configmap "${s.configMap.name}"`);
          } else if (s.secret) {
            const data = await this.#secret(s.secret.name, s.secret.optional === true);
            if (data) writeFiles(host, data, s.secret.items, `secret "${s.secret.name}"`);
          } else if (s.downwardAPI) {
            for (const item of s.downwardAPI.items ?? []) {
              if (!item.fieldRef) continue;
              writeFiles(host, { v: Buffer.from(fieldValue(this.#pod, this.#ip, item.fieldRef.fieldPath)) }, [{ key: 'v', path: item.path }], 'downwardAPI');
            }
          }
        }
      } else {
        throw new PodNotStartable('CreateContainerConfigError', `volume '${v.name}': only emptyDir, secret, configMap and projected volumes run here`);
      }
    }
    return made;
  }

  /** A container's environment, as a kubelet builds it: envFrom, then env (later wins), with $(VAR) references expanded. */
  async env(container: any): Promise<Record<string, string>> {
    const { apiServer } = this.#ctx;
    const env: Record<string, string> = {
      PATH: '/usr/bin:/bin',
      HOSTNAME: this.#pod.metadata.name,
      KUBERNETES_SERVICE_HOST: apiServer.host,
      KUBERNETES_SERVICE_PORT: String(apiServer.port),
      FLINT_HOST: this.#ip,
    };
    for (const from of container.envFrom ?? []) {
      const data = from.secretRef
        ? await this.#secret(from.secretRef.name, from.secretRef.optional === true)
        : from.configMapRef
          ? await this.#configMap(from.configMapRef.name, from.configMapRef.optional === true)
          : undefined;
      for (const [k, v] of Object.entries(data ?? {})) env[`${from.prefix ?? ''}${k}`] = v.toString('utf8');
    }
    for (const e of container.env ?? []) {
      const ref = e.valueFrom;
      if (!ref) env[e.name] = String(e.value ?? '').replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m: string, n: string) => env[n] ?? m);
      else if (ref.secretKeyRef) {
        const v = (await this.#secret(ref.secretKeyRef.name, ref.secretKeyRef.optional === true))?.[ref.secretKeyRef.key];
        if (v === undefined && ref.secretKeyRef.optional !== true) throw new PodNotStartable('CreateContainerConfigError', `couldn't find key ${ref.secretKeyRef.key} in Secret ${this.#ns}/${ref.secretKeyRef.name}`);
        if (v !== undefined) env[e.name] = v.toString('utf8');
      } else if (ref.configMapKeyRef) {
        const v = (await this.#configMap(ref.configMapKeyRef.name, ref.configMapKeyRef.optional === true))?.[ref.configMapKeyRef.key];
        if (v === undefined && ref.configMapKeyRef.optional !== true) throw new PodNotStartable('CreateContainerConfigError', `couldn't find key ${ref.configMapKeyRef.key} in ConfigMap ${this.#ns}/${ref.configMapKeyRef.name}`);
        if (v !== undefined) env[e.name] = v.toString('utf8');
      } else if (ref.fieldRef) env[e.name] = fieldValue(this.#pod, this.#ip, ref.fieldRef.fieldPath);
    }
    return env;
  }
}

export interface SpawnedContainer {
  child: ChildProcess;
  startedAt: string;
}

/** Where a pod's name-resolution files (hosts, nsswitch.conf) appear inside its containers; /etc/hosts links there. */
const POD_ETC = '/flint/etc';

/**
 * Writes a pod's /etc/hosts as a kubelet does (localhost, the pod's own name) plus the Services the node's proxy
 * names (service-proxy.ts), and an nsswitch.conf that reads it before DNS. Each file is replaced by a rename, so a
 * container resolving a name while Services change reads the old file or the new, never half of one.
 */
export function writePodEtc(etcDir: string, pod: any, ip: string, services: string[]): void {
  fs.mkdirSync(etcDir, { recursive: true });
  const hosts = [
    '# The Flint node agent writes this file: the pod itself and the Services its proxy serves (no cluster DNS here).',
    '127.0.0.1\tlocalhost',
    '::1\tlocalhost ip6-localhost ip6-loopback',
    `${ip}\t${pod.spec.hostname ?? pod.metadata.name}`,
    ...services,
    '',
  ].join('\n');
  for (const [name, text] of [
    ['hosts', hosts],
    ['nsswitch.conf', 'hosts: files dns\n'],
  ]) {
    const tmp = path.join(etcDir, `.${name}.tmp`);
    fs.writeFileSync(tmp, text, { mode: 0o644 });
    fs.renameSync(tmp, path.join(etcDir, name));
  }
}

/** Starts one container under bubblewrap, on the host's network (the pod's loopback address is its own). */
export function spawnContainer(
  ctx: PodContext,
  pod: any,
  container: any,
  env: Record<string, string>,
  volumes: Map<string, string>,
  etcDir: string,
  onOutput: (text: string) => void,
): SpawnedContainer {
  const { command, binds, binaries } = containerCommand(ctx, container, env);
  const mounts = (container.volumeMounts ?? []).map((m: any) => {
    const host = volumes.get(m.name);
    if (!host) throw new PodNotStartable('CreateContainerConfigError', `volumeMount '${m.name}' names no volume of the pod`);
    return { host: m.subPath ? path.join(host, m.subPath) : host, at: m.mountPath, writable: !m.readOnly };
  });
  const args = bwrapArgs({ binds: [...binds, ...mounts], binaries, tmpSizeBytes: 64 << 20, hostname: pod.metadata.name, chdir: '/tmp' }, command);
  // The pod network here is the host's loopback (each pod its own 127.x address), so pods keep the host's network namespace.
  args.splice(args.indexOf('--unshare-all') + 1, 0, '--share-net');
  // The host's /etc/hosts gives way to the pod's own (a link into a directory bound whole, so a rewrite shows at once).
  const hosts = args.findIndex((a, i) => a === '--ro-bind-try' && args[i + 1] === '/etc/hosts');
  if (hosts < 0) throw new Error('the sandbox no longer binds /etc/hosts where the node agent expects it');
  args.splice(
    hosts,
    3,
    ...['--ro-bind', etcDir, POD_ETC, '--symlink', `${POD_ETC}/hosts`, '/etc/hosts', '--symlink', `${POD_ETC}/nsswitch.conf`, '/etc/nsswitch.conf'],
    ...['--ro-bind-try', '/etc/resolv.conf', '/etc/resolv.conf'],
  );
  const child = spawn(BWRAP, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (d: Buffer) => onOutput(String(d)));
  child.stderr?.on('data', (d: Buffer) => onOutput(String(d)));
  return { child, startedAt: new Date().toISOString() };
}
