// One build: the source unpacked into a fresh work directory, the builder's
// command run on it in a sandbox, under a time limit, its output captured
// line by line. What it leaves at DEPLOY_PKG is the result; the caller
// stores it. Builders fetch dependencies, so the sandbox gets external
// network, through an egress namespace of its own like a networked
// function's: a source package's build scripts are as untrusted as its
// code, and must not reach the host either. Where this server cannot make
// one, the build runs offline and its log says why (a build that needs no
// download still succeeds).
//
//   <workDir>/src       the source (SRC_PKG: this directory, or src/source for a source that is one plain file)
//   <workDir>/deploy    DEPLOY_PKG, created by the build (a file or a directory)
//   <workDir>/tmp       /tmp of an unsandboxed build
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { extractZip, isZipFile } from '../archive/index.ts';
import type { BuilderLaunch } from '../runtimes/index.ts';
import { SANDBOX_PATHS, sandboxBinaryPath, sandboxCommand } from '../sandbox/bwrap.ts';
import { createWorkerCgroups } from '../sandbox/cgroup.ts';
import type { EgressNamespace, EgressProvider } from '../sandbox/egress.ts';
import { onCpus } from '../sandbox/cpu-affinity.ts';
import { withLimits } from '../sandbox/limits.ts';
import { LineSplitter } from '../sandbox/lines.ts';

export interface BuildJob {
  /** [a-z0-9-], at most 63 characters: names the cgroups and the sandbox's hostname. */
  id: string;
  builder: BuilderLaunch;
  /** Program and arguments (no shell). */
  command: string[];
  /** Host path of the source archive: a zip, or a single file. */
  sourceFile: string;
  /** Cap on the unpacked source (zip bombs stop here). */
  maxUnpackedBytes: number;
  /** Empty or missing host directory for this build; the caller removes it. */
  workDir: string;
  /** Host directory kept between builds of this builder (package caches). */
  cacheDir: string;
  sandbox: 'bubblewrap' | 'none';
  /** Where a sandboxed build's network namespace comes from; unset: the build has no network. */
  egress?: EgressProvider;
  timeoutMs: number;
  memoryMB: number;
  /** The CPUs the build runs on, as taskset writes them ('' or unset: the scheduler's choice). */
  cpus?: string;
  onLine(line: string): void;
}

export type BuildOutcome =
  | { ok: true; deployPath: string }
  | { ok: false; reason: string };

const MIB = 1024 * 1024;
const PIDS_MAX = 4096;
const KILL_GRACE_MS = 2000;

async function unpackSource(job: BuildJob, srcDir: string): Promise<string> {
  fs.mkdirSync(srcDir, { recursive: true });
  if (await isZipFile(job.sourceFile)) {
    await extractZip(job.sourceFile, srcDir, { maxBytes: job.maxUnpackedBytes });
    return srcDir;
  }
  // A source that is not a zip is one file; the CLI zips whatever it uploads, so this is an API client's.
  const file = path.join(srcDir, 'source');
  fs.copyFileSync(job.sourceFile, file);
  return file;
}

export async function runBuild(job: BuildJob): Promise<BuildOutcome> {
  const srcDir = path.join(job.workDir, 'src');
  const deployHost = path.join(job.workDir, 'deploy');
  const tmpHost = path.join(job.workDir, 'tmp');
  fs.mkdirSync(tmpHost, { recursive: true });
  fs.mkdirSync(job.cacheDir, { recursive: true });
  // Errors here are the archive's (FLINT_ERR_BAD_ARCHIVE): the caller reports them as the build's failure.
  const srcHost = await unpackSource(job, srcDir);

  const sandboxed = job.sandbox === 'bubblewrap';
  const inside = (hostPath: string) => (sandboxed ? path.posix.join(SANDBOX_PATHS.packages, path.relative(job.workDir, hostPath)) : hostPath);
  const builderDir = sandboxed ? SANDBOX_PATHS.builder : job.builder.dir;
  const sources = job.builder.sources?.() ?? [];
  const env: Record<string, string> = {
    PATH: [builderDir, ...(job.builder.path?.() ?? []), '/usr/local/bin', '/usr/bin', '/bin'].join(':'),
    LANG: 'C.UTF-8',
    HOME: sandboxed ? SANDBOX_PATHS.tmp : tmpHost,
    TMPDIR: sandboxed ? SANDBOX_PATHS.tmp : tmpHost,
    ...job.builder.env?.(),
    ...Object.fromEntries(sources.map((s) => [s.env, sandboxed ? s.at : s.host])),
    SRC_PKG: inside(srcHost),
    DEPLOY_PKG: inside(deployHost),
    FLINT_BUILD_CACHE: sandboxed ? SANDBOX_PATHS.buildCache : job.cacheDir,
  };
  const cwd = inside(srcDir);
  let argv = job.command;
  let netns: EgressNamespace | undefined;
  if (sandboxed) {
    try {
      netns = await job.egress?.create();
    } catch (err) {
      job.onLine(`flint: the build runs without network: ${(err as Error).message}`);
    }
    argv = sandboxCommand(
      {
        binds: [
          { host: job.builder.dir, at: SANDBOX_PATHS.builder },
          ...sources.map((s) => ({ host: s.host, at: s.at })),
          { host: job.workDir, at: SANDBOX_PATHS.packages, writable: true },
          { host: job.cacheDir, at: SANDBOX_PATHS.buildCache, writable: true },
        ],
        binaries: job.builder.binaries(),
        network: netns && { netnsPath: netns.path, resolvConf: netns.resolvConf },
        tmpSizeBytes: job.memoryMB * MIB,
        hostname: job.id,
        chdir: cwd,
      },
      argv.map((a, i) => (i === 0 && path.isAbsolute(a) ? sandboxBinaryPath(a) : a)),
    );
  }
  const cg = createWorkerCgroups(`build-${job.id}`.slice(0, 63), { memoryBytes: job.memoryMB * MIB, pidsMax: PIDS_MAX });
  argv = onCpus(job.cpus ?? '', withLimits(argv, cg, undefined));

  try {
    const exit = await new Promise<{ code: number | null; signal: string | null; timedOut: boolean; error?: Error }>((resolve) => {
      const child = spawn(argv[0], argv.slice(1), { env, cwd: sandboxed ? '/' : cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      let timedOut = false;
      const killGroup = (sig: NodeJS.Signals) => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, sig);
        } catch {}
      };
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup('SIGTERM');
        setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS).unref();
      }, job.timeoutMs);
      for (const stream of [child.stdout, child.stderr]) {
        const splitter = new LineSplitter(job.onLine);
        stream.on('data', (c: Buffer) => splitter.write(c));
        stream.on('end', () => splitter.end());
      }
      child.once('error', (error) => {
        clearTimeout(timer);
        resolve({ code: null, signal: null, timedOut, error });
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        // Whatever the build left running in its group goes with it.
        killGroup('SIGKILL');
        resolve({ code, signal, timedOut });
      });
    });
    if (exit.error) return { ok: false, reason: `the build command could not be started: ${exit.error.message}` };
    if (exit.timedOut) return { ok: false, reason: `the build did not finish within ${Math.round(job.timeoutMs / 1000)} s and was stopped` };
    if (exit.code !== 0) {
      const how = exit.signal ? `was killed by ${exit.signal}${exit.signal === 'SIGKILL' && cg?.memory ? ` (out of memory? the limit is ${job.memoryMB} MB)` : ''}` : `exited with code ${exit.code}`;
      return { ok: false, reason: `the build command '${job.command.join(' ')}' ${how}` };
    }
    if (!fs.existsSync(deployHost)) return { ok: false, reason: 'the build succeeded but wrote nothing at DEPLOY_PKG' };
    return { ok: true, deployPath: deployHost };
  } finally {
    await cg?.remove();
    await netns?.release();
  }
}
