// How the host starts one runtime's generic worker and runs its builder. Each
// runtime describes itself in its own `launch.ts`; the executor and the build
// manager read these descriptions through `runtimeLaunch()` and know nothing
// else about the runtimes.
import type { RuntimeName } from '../api/images.ts';

export interface RuntimeLaunch {
  /**
   * Host directory of the runtime server (read-only at /flint/runtime in the
   * sandbox). It must hold everything the server loads, apart from what
   * `binds()` adds.
   */
  dir: string;
  /**
   * Host directories the server loads from besides `dir` (a package it
   * imports), each bound read-only into the sandbox. `runtimeDir` is where
   * `dir` is as the worker sees it; a bind may not lie inside it, since a
   * read-only bind has no room for a mount point. Unsandboxed the server
   * runs from `dir` on the host and finds these where they are.
   */
  binds?(runtimeDir: string): RuntimeBind[];
  /**
   * One-time preparation before the first worker starts (compiling a server
   * binary, say). Memoized by the implementation; rejects with a clear error
   * when the runtime cannot run on this machine.
   */
  prepare?(): Promise<void>;
  /** Host files the command needs besides /usr (bound read-only into the sandbox). */
  binaries(): string[];
  /**
   * The server's command line. `runtimeDir` is where `dir` is as the worker
   * sees it; `binaryPath` maps a host binary to its path in the sandbox.
   */
  command(runtimeDir: string, heapMB: number, binaryPath: (hostPath: string) => string): string[];
  /** The builder image of this runtime (`flint/<rt>-builder`), if it has one. */
  builder?: BuilderLaunch;
}

/**
 * A builder: a directory whose executable `build` runs on a package's source.
 * The build manager runs the command in a sandbox with the source directory
 * as the working directory and these variables set:
 *   SRC_PKG      the unpacked source (a directory, or a single file), writable
 *   DEPLOY_PKG   a path that does not exist yet: the build writes a file or a directory there
 *   FLINT_BUILD_CACHE  a writable directory kept between builds of this builder (package caches)
 *   HOME, TMPDIR /tmp (private to the build)
 * PATH starts with the builder's directory, so the command `build` is its script.
 */
export interface BuilderLaunch {
  /** Host directory holding the `build` script (read-only at /flint/builder). */
  dir: string;
  /** Host files the build needs besides /usr. */
  binaries(): string[];
  /** Extra environment for the build (toolchain locations and the like). */
  env?(): Record<string, string>;
  /** PATH entries (as seen in the sandbox) to put after the builder directory. */
  path?(): string[];
  /** Host directories the build reads besides `dir` (sources it compiles in). */
  sources?(): BuilderSource[];
}

/**
 * A host directory a build reads: read-only at `at` in the sandbox (outside
 * /flint/builder), at its host path without one; the variable `env` tells the
 * build where it is.
 */
export interface BuilderSource {
  host: string;
  at: string;
  env: string;
}

/** A host directory made visible, read-only, inside a runtime's sandbox. */
export interface RuntimeBind {
  host: string;
  /** Path inside the sandbox. */
  at: string;
}

export type RuntimeLaunches = Partial<Record<RuntimeName, RuntimeLaunch>>;
