// The proxies the benchmarks put beside Flint's router, each in front of a
// node:http upstream on a loopback TCP port, one worker each: nginx and
// HAProxy from Debian, Go's httputil.ReverseProxy (bench/peers/goproxy,
// built with the machine's Go), an attempt at Knative's queue-proxy as
// released, and a Node socket pipe (bench/peers/node-pipe), the floor under
// any proxy written in Node. The config generators are pure, for the tests.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ensureGoModuleBinary, type GoModule } from '../scripts/go-module.ts';
import { freePort } from '../scripts/local-brokers.ts';
import { waitFor200 } from './lib.ts';

const run = promisify(execFile);

export interface RunningProxy {
  url: string;
  stop(): Promise<void>;
}

/** `name` on PATH or in the sbin directories Debian installs daemons to. */
export function findProgram(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin']) {
    if (!dir) continue;
    const p = path.join(dir, name);
    if (fs.existsSync(p)) return p;
  }
  return undefined;
}

export interface ProxyConfig {
  /** Where its pid, logs and temporary files go. */
  dir: string;
  listenPort: number;
  upstreamPort: number;
  /** Idle keep-alive connections kept to the upstream. */
  keepalive: number;
}

/** nginx with one worker process, a keep-alive upstream (HTTP/1.1, no Connection header passed on) and no access log; run with -g 'daemon off;'. */
export function nginxConfig(c: ProxyConfig): string {
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${c.dir}/${t}-temp;`).join('\n');
  return `worker_processes 1;
pid ${c.dir}/nginx.pid;
error_log ${c.dir}/error.log warn;
worker_rlimit_nofile 20000;
events { worker_connections 8192; }
http {
  access_log off;
${temp}
  upstream fn { server 127.0.0.1:${c.upstreamPort}; keepalive ${c.keepalive}; }
  server {
    listen 127.0.0.1:${c.listenPort} backlog=4096;
    location / { proxy_pass http://fn; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`;
}

/** HAProxy with one thread, HTTP mode, keep-alive on both sides and server connections reused across clients (`http-reuse always`). */
export function haproxyConfig(c: ProxyConfig): string {
  return `global
  nbthread 1
  maxconn 4096

defaults
  mode http
  option http-keep-alive
  http-reuse always
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s

frontend peers
  bind 127.0.0.1:${c.listenPort}
  default_backend fn

backend fn
  server upstream 127.0.0.1:${c.upstreamPort} pool-max-conn ${c.keepalive}
`;
}

/** Spawns a proxy and waits until `url` answers 200 through it; `stopSignal` ends it. */
async function startProxy(command: string, args: string[], url: string, stopSignal: NodeJS.Signals): Promise<RunningProxy> {
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  return whenServing(child, url, stopSignal);
}

async function whenServing(child: ChildProcess, url: string, stopSignal: NodeJS.Signals): Promise<RunningProxy> {
  const exited = once(child, 'exit');
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(stopSignal);
    await exited;
  };
  try {
    await Promise.race([
      waitFor200(url),
      exited.then(([code]) => {
        throw new Error(`${child.spawnfile} exited with ${code} before it served ${url}`);
      }),
    ]);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, stop };
}

export async function startNginx(nginx: string, c: Omit<ProxyConfig, 'listenPort'>): Promise<RunningProxy> {
  const cfg = { ...c, listenPort: await freePort() };
  const conf = path.join(c.dir, 'nginx.conf');
  fs.writeFileSync(conf, nginxConfig(cfg));
  // SIGQUIT: nginx's graceful stop.
  return startProxy(nginx, ['-p', c.dir, '-e', path.join(c.dir, 'error.log'), '-c', conf, '-g', 'daemon off;'], `http://127.0.0.1:${cfg.listenPort}/`, 'SIGQUIT');
}

export async function startHaproxy(haproxy: string, c: Omit<ProxyConfig, 'listenPort'>): Promise<RunningProxy> {
  const cfg = { ...c, listenPort: await freePort() };
  const conf = path.join(c.dir, 'haproxy.cfg');
  fs.writeFileSync(conf, haproxyConfig(cfg));
  return startProxy(haproxy, ['-f', conf, '-db'], `http://127.0.0.1:${cfg.listenPort}/`, 'SIGTERM');
}

export const GOPROXY_MODULE: GoModule = {
  dir: path.join(import.meta.dirname, 'peers', 'goproxy'),
  files: ['go.mod', 'main.go'],
  cacheName: 'bench-goproxy',
  binary: 'goproxy',
  what: "the benchmark's Go ReverseProxy peer (bench/peers/goproxy)",
  env: { CGO_ENABLED: '0', GOFLAGS: '-mod=mod' },
};

/** Go's ReverseProxy (built into the cache when bench/peers/goproxy changed) with GOMAXPROCS=1. */
export async function startGoProxy(go: string, c: Omit<ProxyConfig, 'listenPort' | 'dir'>): Promise<RunningProxy> {
  const bin = ensureGoModuleBinary(GOPROXY_MODULE, go);
  const child = spawn(bin, ['-upstream', `http://127.0.0.1:${c.upstreamPort}`, '-idle', String(c.keepalive)], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, GOMAXPROCS: '1' },
  });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  return whenServing(child, `http://127.0.0.1:${chunk.toString().trim()}/`, 'SIGTERM');
}

/** The Node socket pipe (bench/peers/node-pipe): a connection to the upstream per client connection, no HTTP parsed. */
export async function startNodePipe(c: Omit<ProxyConfig, 'listenPort' | 'dir' | 'keepalive'>): Promise<RunningProxy> {
  const child = spawn(process.execPath, [path.join(import.meta.dirname, 'peers', 'node-pipe', 'main.ts'), String(c.upstreamPort)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  return whenServing(child, `http://127.0.0.1:${chunk.toString().trim()}/`, 'SIGTERM');
}

/** The newest release of knative.dev/serving on the module proxy when this was written. */
export const QUEUE_PROXY_VERSION = 'v0.51.0';

/**
 * Knative's queue-proxy (knative.dev/serving/cmd/queue) built as released,
 * in a scratch module of the cache: its path, or why it did not build.
 */
export async function buildQueueProxy(go: string): Promise<{ bin: string } | { reason: string }> {
  const dir = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'flint', 'bench-queue-proxy', QUEUE_PROXY_VERSION);
  const bin = path.join(dir, 'queue');
  if (fs.existsSync(bin)) return { bin };
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'go.mod'), 'module flint.dev/bench/queueproxy\n\ngo 1.21\n');
  fs.rmSync(path.join(dir, 'go.sum'), { force: true });
  const env = { ...process.env, GOFLAGS: '-mod=mod', CGO_ENABLED: '0' };
  const go1 = (args: string[]) => run(go, args, { cwd: dir, env, timeout: 5 * 60_000, maxBuffer: 16 << 20 });
  try {
    await go1(['get', `knative.dev/serving@${QUEUE_PROXY_VERSION}`]);
    await go1(['build', '-trimpath', '-o', bin, 'knative.dev/serving/cmd/queue']);
    return { bin };
  } catch (err) {
    return { reason: `knative.dev/serving ${QUEUE_PROXY_VERSION}: ${goFailure(String((err as { stderr?: string }).stderr ?? (err as Error).message))}` };
  }
}

/** The gist of a failed `go build`: the distinct module versions it could not fetch, else its first error line. */
export function goFailure(stderr: string): string {
  const refused = new Map<string, string>();
  for (const m of stderr.matchAll(/([\w.\-/]+@v[\w.\-+]+): reading \S+: (\d{3} [A-Za-z ]+)/g)) refused.set(m[1], m[2].trim());
  if (refused.size > 0) {
    const list = [...refused].map(([mod, status]) => `${mod} (${status})`).join(', ');
    return `the module proxy does not serve ${list}, which it requires`;
  }
  const line = stderr.split('\n').find((l) => l.trim() !== '' && !l.startsWith('go: downloading'));
  return (line ?? 'go build failed').trim();
}
