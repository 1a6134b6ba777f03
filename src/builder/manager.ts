// The build manager: every package whose status is `pending` gets built, one
// build per package at a time and `concurrency` at once. A package found
// `running` at start-up was cut off by a restart and is built again. The
// result is stored as the package's deployment archive (with `succeeded`) or
// the failure is recorded (with `failed` and the log); either way in one
// store write, so a crash in between leaves the package `running` and the
// next start builds it again.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { ARCHIVE_URL_PREFIX, DEFAULT_BUILD_COMMAND, splitBuildCommand } from '../api/build-command.ts';
import { FlintError } from '../api/errors.ts';
import { builderForImage, runtimeForImage } from '../api/images.ts';
import type { Archive, Package } from '../api/kinds.ts';
import type { ArchiveStore } from '../archive/index.ts';
import { resolveArchive } from '../archive/resolve.ts';
import { runtimeLaunch } from '../runtimes/index.ts';
import type { Store, Watch } from '../store/store.ts';
import { BuildLog } from './build-log.ts';
import { storeBuildOutput } from './output.ts';
import type { EgressProvider } from '../sandbox/egress.ts';
import { runBuild } from './run-build.ts';

export interface BuildManagerOptions {
  store: Store;
  archives: ArchiveStore;
  /** Working directories of builds (emptied at start). */
  buildsDir: string;
  /** Per-builder caches, `<cacheDir>/<runtime>`. */
  cacheDir: string;
  sandbox: 'bubblewrap' | 'none';
  /** Gives sandboxed builds a network namespace of their own with egress; without one they build offline. */
  egress?: EgressProvider;
  timeoutSeconds: number;
  memoryMB: number;
  /** The CPUs builds run on, as taskset writes them ('' or unset: the scheduler's choice). */
  cpus?: string;
  concurrency: number;
  maxUnpackedBytes: number;
  logger: Logger;
  /** How often a running build's log is written to the package status (default 2 s). */
  logFlushMs?: number;
}

const keyOf = (p: Package) => `${p.metadata.namespace}/${p.metadata.name}`;

export class BuildManager {
  readonly #o: BuildManagerOptions;
  readonly #queue: string[] = [];
  readonly #queued = new Set<string>();
  readonly #active = new Set<string>();
  readonly #idle: (() => void)[] = [];
  #watch: Watch | undefined;
  #stopped = false;

  constructor(opts: BuildManagerOptions) {
    this.#o = opts;
  }

  async start(): Promise<void> {
    // Nothing in here outlives the build that made it.
    fs.rmSync(this.#o.buildsDir, { recursive: true, force: true });
    fs.mkdirSync(this.#o.buildsDir, { recursive: true });
    const pkgs = await this.#o.store.list('Package');
    for (const p of pkgs.items) {
      const s = p.status?.buildstatus;
      if (s === 'pending' || s === 'running') this.#enqueue(keyOf(p));
    }
    this.#watch = this.#o.store.watch({ kind: 'Package', sinceResourceVersion: pkgs.resourceVersion }, (ev) => {
      if (ev.type !== 'DELETED' && (ev.object as Package).status?.buildstatus === 'pending') this.#enqueue(keyOf(ev.object as Package));
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#watch?.close();
    this.#queue.length = 0;
    this.#queued.clear();
    await this.idle();
  }

  /** Resolves when no build is running or waiting (for tests and shutdown). */
  idle(): Promise<void> {
    if (this.#active.size === 0 && this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #enqueue(key: string): void {
    if (this.#stopped || this.#queued.has(key)) return;
    this.#queued.add(key);
    this.#queue.push(key);
    this.#pump();
  }

  #pump(): void {
    while (!this.#stopped && this.#active.size < this.#o.concurrency) {
      // One build per package at a time: a package changed mid-build waits for it.
      const i = this.#queue.findIndex((k) => !this.#active.has(k));
      if (i === -1) break;
      const [key] = this.#queue.splice(i, 1);
      this.#queued.delete(key);
      this.#active.add(key);
      void this.#build(key)
        .catch((err) => this.#o.logger.error({ package: key, err }, 'build manager error'))
        .finally(() => {
          this.#active.delete(key);
          this.#pump();
          if (this.#active.size === 0 && this.#queue.length === 0) for (const r of this.#idle.splice(0)) r();
        });
    }
  }

  async #build(key: string): Promise<void> {
    const [ns, name] = key.split('/');
    const { store } = this.#o;
    let pkg = await store.get('Package', ns, name);
    const status = pkg?.status?.buildstatus;
    if (!pkg || (status !== 'pending' && status !== 'running')) return;
    const generation = pkg.metadata.generation;
    const started = new Date().toISOString();
    pkg = await store.updateStatus({ ...pkg, status: { ...pkg.status, buildstatus: 'running', buildlog: '', lastUpdateTimestamp: started } });
    const log = new BuildLog();
    const logger = this.#o.logger.child({ package: key });
    logger.info('build started');

    let outcome: { deployment: Archive } | { failure: string };
    let flusher: NodeJS.Timeout | undefined;
    const workDir = path.join(this.#o.buildsDir, `${ns}-${name}-${randomBytes(3).toString('hex')}`);
    try {
      const prepared = await this.#prepare(pkg);
      log.line(`+ ${prepared.command.join(' ')}`);
      // The log so far, for `package info` while the build runs; best effort.
      flusher = setInterval(() => {
        void store
          .get('Package', ns, name)
          .then((cur) => (cur?.status?.buildstatus === 'running' && cur.metadata.generation === generation ? store.updateStatus({ ...cur, status: { ...cur.status, buildlog: log.text() } }) : undefined))
          .catch(() => {});
      }, this.#o.logFlushMs ?? 2000);
      const source = await resolveArchive(this.#o.archives, pkg.spec.source as Archive, { maxBytes: this.#o.maxUnpackedBytes });
      const result = await runBuild({
        id: `b-${randomBytes(5).toString('hex')}`,
        builder: prepared.builder,
        command: prepared.command,
        sourceFile: source.path,
        workDir,
        cacheDir: path.join(this.#o.cacheDir, prepared.runtime),
        sandbox: this.#o.sandbox,
        egress: this.#o.egress,
        timeoutMs: this.#o.timeoutSeconds * 1000,
        memoryMB: this.#o.memoryMB,
        cpus: this.#o.cpus,
        maxUnpackedBytes: this.#o.maxUnpackedBytes,
        onLine: (l) => log.line(l),
      });
      if (result.ok) {
        const stored = await storeBuildOutput(this.#o.archives, result.deployPath, workDir, prepared.keepArchive);
        outcome = { deployment: { type: 'url', url: `${ARCHIVE_URL_PREFIX}${stored.sha256}`, checksum: { type: 'sha256', sum: stored.sha256 } } };
      } else outcome = { failure: result.reason };
    } catch (err) {
      outcome = { failure: err instanceof FlintError ? err.message : `internal error: ${(err as Error).message}` };
      if (!(err instanceof FlintError)) logger.error({ err }, 'build failed unexpectedly');
    } finally {
      clearInterval(flusher);
      fs.rmSync(workDir, { recursive: true, force: true });
    }
    if ('failure' in outcome) log.line(`error building source package: ${outcome.failure}`);

    const cur = await store.get('Package', ns, name);
    if (!cur) return;
    if (cur.metadata.generation !== generation) {
      // The package changed while it was being built; that change set it pending and queued it again.
      logger.info('package changed during its build; the result is dropped');
      if (cur.status?.buildstatus === 'pending') this.#enqueue(key);
      return;
    }
    const now = new Date().toISOString();
    if ('failure' in outcome) {
      logger.info({ reason: outcome.failure }, 'build failed');
      await store.updateStatus({ ...cur, status: { ...cur.status, buildstatus: 'failed', buildlog: log.text(), lastUpdateTimestamp: now } });
    } else {
      logger.info('build succeeded');
      await store.update({
        ...cur,
        spec: { ...cur.spec, deployment: outcome.deployment },
        status: { ...cur.status, buildstatus: 'succeeded', buildlog: log.text(), lastUpdateTimestamp: now },
      });
    }
  }

  async #prepare(pkg: Package) {
    const envNs = pkg.spec.environment.namespace ?? pkg.metadata.namespace;
    const env = await this.#o.store.get('Environment', envNs, pkg.spec.environment.name);
    if (!env) throw new FlintError('FLINT_ERR_NOT_FOUND', `environment '${pkg.spec.environment.name}' not found in namespace '${envNs}'`);
    if (!pkg.spec.source) throw new FlintError('FLINT_ERR_VALIDATION', 'the package has no source archive to build');
    const image = env.spec.builder?.image;
    if (!image) {
      throw new FlintError(
        'FLINT_ERR_VALIDATION',
        `environment '${env.metadata.name}' has no builder: create it with --builder flint/${runtimeForImage(env.spec.runtime.image) ?? 'node'}-builder, or give the package a deploy archive instead of a source`,
      );
    }
    const runtime = builderForImage(image);
    const builder = runtime ? runtimeLaunch(runtime)?.builder : undefined;
    if (!runtime || !builder) throw new FlintError('FLINT_ERR_UNAVAILABLE', `builder image '${image}' has no local builder`);
    const command = splitBuildCommand(pkg.spec.buildcmd || env.spec.builder?.command || DEFAULT_BUILD_COMMAND);
    return { runtime, builder, command, keepArchive: env.spec.keeparchive === true };
  }
}
