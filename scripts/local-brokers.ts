// Real NATS (JetStream), RabbitMQ and Redis servers from Debian's packages,
// started on free loopback ports in temporary directories, for tests and
// local trials. RabbitMQ and Redis can also listen for TLS, on a second port
// that wants a client certificate.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../src/ingress/free-port.ts';

export interface LocalBroker {
  url: string;
  port: number;
  dir: string;
  /** The TLS listener, when asked for: its URL, the CA that signed its certificate, and a client certificate it accepts. */
  tls?: BrokerTls;
  stop(): Promise<void>;
  restart(): Promise<void>;
}

export interface BrokerTls {
  url: string;
  port: number;
  ca: string;
  client: { cert: string; key: string };
}

/** A self-signed certificate and its unencrypted PKCS#8 key (PEM), made once per directory. */
export function selfSigned(dir: string, name: string, subjectAltName: string): { cert: string; key: string } {
  const key = path.join(dir, `${name}.key`);
  const crt = path.join(dir, `${name}.crt`);
  if (!fs.existsSync(crt)) {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', crt, '-days', '2', '-subj', `/CN=${name}`, '-addext', `subjectAltName=${subjectAltName}`], { stdio: 'ignore' });
  }
  return { cert: fs.readFileSync(crt, 'utf8'), key: fs.readFileSync(key, 'utf8') };
}

/**
 * Certificate files for a broker's TLS listener: a CA, and the server's
 * (for 127.0.0.1) and a client's certificates it issued. Issued rather than
 * self-signed because some servers (RabbitMQ's Erlang TLS) refuse a CA
 * certificate as a peer's own.
 */
interface TlsFiles {
  caCert: string;
  serverCert: string;
  serverKey: string;
  material: Omit<BrokerTls, 'url' | 'port'>;
}

function issue(dir: string, name: string, extensions: string[]): { cert: string; key: string } {
  const file = (ext: string) => path.join(dir, `${name}.${ext}`);
  fs.writeFileSync(file('ext'), `${['basicConstraints=CA:FALSE', ...extensions].join('\n')}\n`);
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('key'), '-out', file('csr'), '-subj', `/CN=${name}`]);
  openssl(['x509', '-req', '-in', file('csr'), '-CA', path.join(dir, 'ca.crt'), '-CAkey', path.join(dir, 'ca.key'), '-CAcreateserial', '-out', file('crt'), '-days', '2', '-extfile', file('ext')]);
  return { cert: fs.readFileSync(file('crt'), 'utf8'), key: fs.readFileSync(file('key'), 'utf8') };
}

function tlsFiles(dir: string): TlsFiles {
  const ca = selfSigned(dir, 'ca', 'DNS:flint-test-ca');
  // localhost too: nats.js checks an IP-addressed server's certificate against that name.
  issue(dir, 'server', ['subjectAltName=IP:127.0.0.1,DNS:localhost', 'extendedKeyUsage=serverAuth']);
  const client = issue(dir, 'client', ['subjectAltName=DNS:client', 'extendedKeyUsage=clientAuth']);
  return {
    caCert: path.join(dir, 'ca.crt'),
    serverCert: path.join(dir, 'server.crt'),
    serverKey: path.join(dir, 'server.key'),
    material: { ca: ca.cert, client },
  };
}

export { freePort };

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

/** Waits until 127.0.0.1:`port` takes connections; `check` may throw to stop waiting early. */
async function untilListening(port: number, timeoutMs: number, timeoutMessage: string, check?: () => void): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await canConnect(port))) {
    check?.();
    if (Date.now() > deadline) throw new Error(timeoutMessage);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface ServerOptions {
  name: string;
  args: (port: number, dir: string) => string[];
  scheme: string;
  env?: (port: number, dir: string) => Promise<NodeJS.ProcessEnv>;
  timeoutMs?: number;
  /** Made before the server starts: a TLS listener's port and scheme, and its certificates in `dir`. */
  tls?: { scheme: string; setup(dir: string, port: number, files: TlsFiles): void };
}

async function startServer(o: ServerOptions): Promise<LocalBroker> {
  const { name, args, scheme, env, timeoutMs = 20_000 } = o;
  const bin = findBinary(name);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `flint-${name}-`));
  const port = await freePort();
  let tls: BrokerTls | undefined;
  if (o.tls !== undefined) {
    const tlsPort = await freePort();
    const files = tlsFiles(dir);
    o.tls.setup(dir, tlsPort, files);
    tls = { url: `${o.tls.scheme}://127.0.0.1:${tlsPort}`, port: tlsPort, ...files.material };
  }
  let child: ChildProcess | undefined;
  const launch = async () => {
    const log = fs.openSync(path.join(dir, 'server.log'), 'a');
    child = spawn(bin, args(port, dir), { stdio: ['ignore', log, log], cwd: dir, env: env ? await env(port, dir) : process.env, detached: name === 'rabbitmq-server' });
    fs.closeSync(log);
    const started = child;
    await untilListening(port, timeoutMs, `${name} did not listen on ${port}`, () => {
      if (started.exitCode !== null) throw new Error(`${name} exited with ${started.exitCode}: ${fs.readFileSync(path.join(dir, 'server.log'), 'utf8')}`);
    });
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
  if (tls !== undefined) await untilListening(tls.port, timeoutMs, `${name} did not listen for TLS on ${tls.port}`);
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    dir,
    tls,
    stop,
    async restart() {
      await stop();
      await launch();
    },
  };
}

export interface StartOptions {
  /** Also listen for TLS (LocalBroker.tls), wanting a client certificate. */
  tls?: boolean;
}

export function startRedis(opts: StartOptions = {}): Promise<LocalBroker> {
  let tlsArgs: string[] = [];
  return startServer({
    name: 'redis-server',
    args: (port, dir) => ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', '', ...tlsArgs],
    scheme: 'redis',
    tls: opts.tls
      ? {
          scheme: 'rediss',
          setup(_dir, tlsPort, f) {
            tlsArgs = ['--tls-port', String(tlsPort), '--tls-cert-file', f.serverCert, '--tls-key-file', f.serverKey, '--tls-ca-cert-file', f.caCert, '--tls-auth-clients', 'yes'];
          },
        }
      : undefined,
  });
}

export interface NatsStartOptions {
  /** Clients must log in with this user and password. */
  auth?: { user: string; pass: string };
  /**
   * The client port speaks only TLS and wants a client certificate (NATS has
   * one client port, so LocalBroker.tls names that same port).
   */
  tls?: boolean;
}

export async function startNats(opts: NatsStartOptions = {}): Promise<LocalBroker> {
  const auth = opts.auth === undefined ? [] : ['--user', opts.auth.user, '--pass', opts.auth.pass];
  let files: TlsFiles | undefined;
  const tlsArgs = (dir: string) => {
    if (!opts.tls) return [];
    files ??= tlsFiles(dir);
    return ['--tls', '--tlscert', files.serverCert, '--tlskey', files.serverKey, '--tlscacert', files.caCert, '--tlsverify'];
  };
  const broker = await startServer({
    name: 'nats-server',
    args: (port, dir) => ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', path.join(dir, 'js'), ...auth, ...tlsArgs(dir)],
    scheme: 'nats',
  });
  if (files !== undefined) broker.tls = { url: `tls://127.0.0.1:${broker.port}`, port: broker.port, ...files.material };
  return broker;
}

export function startRabbit(opts: StartOptions = {}): Promise<LocalBroker> {
  return startServer({
    name: 'rabbitmq-server',
    args: () => [],
    scheme: 'amqp',
    tls: opts.tls
      ? {
          scheme: 'amqps',
          setup(dir, tlsPort, f) {
            fs.writeFileSync(
              path.join(dir, 'rabbitmq.conf'),
              [
                `listeners.ssl.1 = 127.0.0.1:${tlsPort}`,
                `ssl_options.cacertfile = ${f.caCert}`,
                `ssl_options.certfile = ${f.serverCert}`,
                `ssl_options.keyfile = ${f.serverKey}`,
                'ssl_options.verify = verify_peer',
                'ssl_options.fail_if_no_peer_cert = true',
                '',
              ].join('\n'),
            );
          },
        }
      : undefined,
    env: async (port, dir) => {
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
    timeoutMs: 90_000,
  });
}
