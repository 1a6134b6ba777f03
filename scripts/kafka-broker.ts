// A real Apache Kafka broker in KRaft mode, from its Maven Central artifacts
// (test/kafka/pom.xml), on a loopback port. Tests and `npm run kafka` use it.
// The jars are fetched once with Maven and cached outside the checkout.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canConnect, freePort } from './local-brokers.ts';

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
}

export async function startKafka(opts: KafkaOptions = {}): Promise<KafkaBroker> {
  const libs = ensureKafkaJars();
  const dataDir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'flint-kafka-'));
  const port = opts.port ?? (await freePort());
  const controllerPort = await freePort();
  const saslPort = opts.saslUsers === undefined ? undefined : await freePort();
  const props = path.join(dataDir, 'server.properties');
  const logDir = path.join(dataDir, 'logs');
  const sasl = saslPort === undefined ? '' : `,SASL_PLAINTEXT://127.0.0.1:${saslPort}`;
  const saslLines =
    opts.saslUsers === undefined
      ? []
      : [
          'sasl.enabled.mechanisms=PLAIN',
          'inter.broker.listener.name=PLAINTEXT',
          // The broker's own login is not used (brokers talk over PLAINTEXT); the user_ entries are who may connect.
          `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker" ${Object.entries(
            opts.saslUsers,
          )
            .map(([u, pw]) => `user_${u}="${pw}"`)
            .join(' ')};`,
        ];
  fs.writeFileSync(
    props,
    [
      'process.roles=broker,controller',
      'node.id=1',
      `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
      `listeners=PLAINTEXT://127.0.0.1:${port}${sasl},CONTROLLER://127.0.0.1:${controllerPort}`,
      `advertised.listeners=PLAINTEXT://127.0.0.1:${port}${sasl}`,
      'controller.listener.names=CONTROLLER',
      `listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT${sasl === '' ? '' : ',SASL_PLAINTEXT:SASL_PLAINTEXT'}`,
      ...saslLines,
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
    saslBrokers: saslPort === undefined ? undefined : `127.0.0.1:${saslPort}`,
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
