// A real Apache Kafka broker in KRaft mode, from its Maven Central artifacts
// (test/kafka/pom.xml), on a loopback port. Tests and `npm run kafka` use it.
// The jars are fetched once with Maven and cached outside the checkout.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canConnect, freePort, selfSigned } from './local-brokers.ts';

const POM = path.resolve(import.meta.dirname, '..', 'test', 'kafka', 'pom.xml');
const VERSION = /<artifactId>kafka_2\.13<\/artifactId><version>([^<]+)</.exec(fs.readFileSync(POM, 'utf8'))![1];

export function kafkaCacheDir(): string {
  const base = process.env.FLINT_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'flint');
  return path.join(base, `kafka-${VERSION}`);
}

/** Fetches the broker's jars with Maven unless they are cached already. */
export function ensureKafkaJars(): string {
  const libs = path.join(kafkaCacheDir(), 'libs');
  if (fs.existsSync(path.join(libs, `kafka_2.13-${VERSION}.jar`))) return libs;
  fs.mkdirSync(libs, { recursive: true });
  execFileSync('mvn', ['-q', '-f', POM, 'dependency:copy-dependencies', `-DoutputDirectory=${libs}`, '-DincludeScope=runtime'], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return libs;
}

export interface KafkaBroker {
  /** `127.0.0.1:<port>`, for `--set kafka.brokers=...`. */
  brokers: string;
  /** `127.0.0.1:<port>` of the SASL/PLAIN listener, when startKafka was given `saslUsers`. */
  saslBrokers?: string;
  /** `127.0.0.1:<port>` of the TLS listener, when startKafka was given `tls`. */
  tlsBrokers?: string;
  /** The TLS listeners' self-signed certificate (PEM), for clients to trust. */
  tlsCa?: string;
  /** `127.0.0.1:<port>` of a TLS listener that also wants a client certificate: `tlsClient`'s. */
  mtlsBrokers?: string;
  /** The certificate and key (PEM) the client-certificate listener accepts. */
  tlsClient?: { cert: string; key: string };
  dataDir: string;
  /** Stops the broker process; the data directory is kept so a restart resumes it. */
  stop(): Promise<void>;
  /** Stops it for good: also removes the data directory, when startKafka made it. */
  destroy(): Promise<void>;
  /** Starts it again on the same port and data (broker-restart tests). */
  restart(): Promise<void>;
}

export interface KafkaOptions {
  dataDir?: string;
  port?: number;
  heapMB?: number;
  /** Users (name: password) of a second listener that takes SASL/PLAIN only. */
  saslUsers?: Record<string, string>;
  /**
   * Two TLS-only listeners with a self-signed certificate for 127.0.0.1: one
   * for any client, one only for clients showing the certificate in `tlsClient`.
   */
  tls?: boolean;
}

function listenerAddress(extra: Array<{ name: string; port: number }>, name: string): string | undefined {
  const l = extra.find((e) => e.name === name);
  return l === undefined ? undefined : `127.0.0.1:${l.port}`;
}

export async function startKafka(opts: KafkaOptions = {}): Promise<KafkaBroker> {
  const libs = ensureKafkaJars();
  const dataDir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'flint-kafka-'));
  const port = opts.port ?? (await freePort());
  const controllerPort = await freePort();
  const props = path.join(dataDir, 'server.properties');
  const logDir = path.join(dataDir, 'logs');
  // Listeners besides the plain one, for clients that authenticate; brokers keep talking over PLAINTEXT.
  const extra: Array<{ name: 'SASL_PLAINTEXT' | 'SSL' | 'MTLS'; port: number }> = [];
  const extraLines: string[] = [];
  if (opts.saslUsers !== undefined) {
    extra.push({ name: 'SASL_PLAINTEXT', port: await freePort() });
    const users = Object.entries(opts.saslUsers)
      .map(([u, pw]) => `user_${u}="${pw}"`)
      .join(' ');
    extraLines.push(
      'sasl.enabled.mechanisms=PLAIN',
      // The broker's own login is never used (no broker talks SASL here); the user_ entries are who may connect.
      `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker" ${users};`,
    );
  }
  let tlsCa: string | undefined;
  let tlsClient: { cert: string; key: string } | undefined;
  if (opts.tls === true) {
    extra.push({ name: 'SSL', port: await freePort() }, { name: 'MTLS', port: await freePort() });
    const server = selfSigned(dataDir, 'broker', 'IP:127.0.0.1');
    tlsClient = selfSigned(dataDir, 'client', 'DNS:client');
    tlsCa = server.cert;
    // Kafka's PEM keystore: the key, then its certificate.
    const keystore = path.join(dataDir, 'keystore.pem');
    fs.writeFileSync(keystore, server.key + server.cert);
    const clients = path.join(dataDir, 'client-truststore.pem');
    fs.writeFileSync(clients, tlsClient.cert);
    extraLines.push(
      'ssl.keystore.type=PEM',
      `ssl.keystore.location=${keystore}`,
      'ssl.client.auth=none',
      'listener.name.mtls.ssl.client.auth=required',
      'listener.name.mtls.ssl.truststore.type=PEM',
      `listener.name.mtls.ssl.truststore.location=${clients}`,
    );
  }
  const extraListeners = extra.map((l) => `,${l.name}://127.0.0.1:${l.port}`).join('');
  fs.writeFileSync(
    props,
    [
      'process.roles=broker,controller',
      'node.id=1',
      `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
      `listeners=PLAINTEXT://127.0.0.1:${port}${extraListeners},CONTROLLER://127.0.0.1:${controllerPort}`,
      `advertised.listeners=PLAINTEXT://127.0.0.1:${port}${extraListeners}`,
      'controller.listener.names=CONTROLLER',
      'inter.broker.listener.name=PLAINTEXT',
      `listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT${extra.map((l) => `,${l.name}:${l.name === 'MTLS' ? 'SSL' : l.name}`).join('')}`,
      ...extraLines,
      `log.dirs=${logDir}`,
      'num.partitions=1',
      'offsets.topic.replication.factor=1',
      'offsets.topic.num.partitions=4',
      'transaction.state.log.replication.factor=1',
      'transaction.state.log.min.isr=1',
      'group.initial.rebalance.delay.ms=0',
      'auto.create.topics.enable=true',
    ].join('\n'),
  );
  const cp = `${libs}/*`;
  if (!fs.existsSync(path.join(logDir, 'meta.properties'))) {
    const clusterId = execFileSync('java', ['-cp', cp, 'kafka.tools.StorageTool', 'random-uuid'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l && !l.startsWith('SLF4J'))
      .pop()!
      .trim();
    execFileSync('java', ['-cp', cp, 'kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', props], { stdio: 'ignore' });
  }
  let child: ChildProcess | undefined;
  const launch = async () => {
    const log = fs.openSync(path.join(dataDir, 'broker.log'), 'a');
    child = spawn('java', [`-Xmx${opts.heapMB ?? 512}m`, '-cp', cp, 'kafka.Kafka', props], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    const deadline = Date.now() + 60_000;
    while (!(await canConnect(port))) {
      if (child.exitCode !== null) throw new Error(`kafka exited with ${child.exitCode}; see ${path.join(dataDir, 'broker.log')}`);
      if (Date.now() > deadline) throw new Error(`kafka did not listen on ${port} within 60 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const stop = async () => {
    const c = child;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    const t = setTimeout(() => c.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(t);
  };
  await launch();
  return {
    brokers: `127.0.0.1:${port}`,
    saslBrokers: listenerAddress(extra, 'SASL_PLAINTEXT'),
    tlsBrokers: listenerAddress(extra, 'SSL'),
    tlsCa,
    mtlsBrokers: listenerAddress(extra, 'MTLS'),
    tlsClient,
    dataDir,
    stop,
    async destroy() {
      await stop();
      if (opts.dataDir === undefined) fs.rmSync(dataDir, { recursive: true, force: true });
    },
    async restart() {
      await stop();
      await launch();
    },
  };
}
