// Real NATS (JetStream) and Redis servers from Debian's packages, started on
// free loopback ports in temporary directories, for tests and local trials.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface LocalBroker {
  url: string;
  port: number;
  dir: string;
  stop(): Promise<void>;
  restart(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

function findBinary(name: string): string {
  // Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user when run
  // as root; the script it wraps runs the broker as the caller.
  for (const dir of name === 'rabbitmq-server' ? ['/usr/lib/rabbitmq/bin'] : ['/usr/bin', '/usr/sbin', '/usr/local/bin']) {
    const p = path.join(dir, name);
    if (fs.existsSync(p)) return p;
  }
  throw new Error(`${name} is not installed (apt-get install ${name})`);
}

async function startServer(
  name: string,
  args: (port: number, dir: string) => string[],
  scheme: string,
  env?: (port: number, dir: string) => Promise<NodeJS.ProcessEnv>,
  timeoutMs = 20_000,
): Promise<LocalBroker> {
  const bin = findBinary(name);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `flint-${name}-`));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const launch = async () => {
    const log = fs.openSync(path.join(dir, 'server.log'), 'a');
    child = spawn(bin, args(port, dir), { stdio: ['ignore', log, log], cwd: dir, env: env ? await env(port, dir) : process.env, detached: name === 'rabbitmq-server' });
    fs.closeSync(log);
    const deadline = Date.now() + timeoutMs;
    while (!(await canConnect(port))) {
      if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}: ${fs.readFileSync(path.join(dir, 'server.log'), 'utf8')}`);
      if (Date.now() > deadline) throw new Error(`${name} did not listen on ${port}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const stop = async () => {
    const c = child;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    // rabbitmq-server is a script over an Erlang VM: signal the whole group.
    if (name === 'rabbitmq-server' && c.pid) {
      try {
        process.kill(-c.pid, 'SIGTERM');
      } catch {
        c.kill('SIGTERM');
      }
    } else c.kill('SIGTERM');
    const t = setTimeout(() => c.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(t);
  };
  await launch();
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    dir,
    stop,
    async restart() {
      await stop();
      await launch();
    },
  };
}

export function startRedis(): Promise<LocalBroker> {
  return startServer('redis-server', (port, dir) => ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', ''], 'redis');
}

export function startNats(): Promise<LocalBroker> {
  return startServer('nats-server', (port, dir) => ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', path.join(dir, 'js')], 'nats');
}

export function startRabbit(): Promise<LocalBroker> {
  return startServer(
    'rabbitmq-server',
    () => [],
    'amqp',
    async (port, dir) => {
      const dist = await freePort();
      return {
        ...process.env,
        HOME: dir,
        RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
        RABBITMQ_NODE_PORT: String(port),
        RABBITMQ_DIST_PORT: String(dist),
        RABBITMQ_NODENAME: `flint${port}@localhost`,
        RABBITMQ_MNESIA_BASE: path.join(dir, 'mnesia'),
        RABBITMQ_LOG_BASE: path.join(dir, 'log'),
        RABBITMQ_CONFIG_FILE: path.join(dir, 'rabbitmq'),
        RABBITMQ_ENABLED_PLUGINS_FILE: path.join(dir, 'enabled_plugins'),
        RABBITMQ_PID_FILE: path.join(dir, 'rabbit.pid'),
      };
    },
    90_000,
  );
}
