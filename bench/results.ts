// What the peers and storm parts of the bench measure, as the tables and the
// charts (charts.ts) read it: types only, so that the parts import the charts
// and the charts import nothing of the parts.
import type { Spread } from './lib.ts';

export interface PeerSummary {
  name: string;
  rps: Spread;
  /** Its req/s over bare node's in the same round. */
  ratio: Spread;
  p50: Spread;
  p99: Spread;
  /** Its p50 (p99) minus bare node's in the same round, µs. */
  addedP50: Spread;
  addedP99: Spread;
  /** All rounds' values, in round order (for the charts). */
  perRound: { ratio: number[]; addedP50: number[]; addedP99: number[]; rps: number[] };
  non2xx: number;
  errors: number;
  /** The hypervisor's steal during its runs, percent of the machine's CPU time, each round's (when measured). */
  steal?: number[];
}

export interface PeersResult {
  /** The baseline's name (BARE), and the router's targets, for the charts. */
  baseline: string;
  targets: { ratio: number; addedP99Us: number };
  connections: number;
  seconds: number;
  rounds: number;
  /** At full load: the baseline first, then each peer measured. */
  summaries: PeerSummary[];
  /** Paced (`thinkMs` between a connection's requests), the same peers. */
  paced: PeerSummary[];
  thinkMs: number;
  /** Peers not measured, and why. */
  skipped: { name: string; reason: string }[];
}

export interface StormResult {
  runtime: string;
  /** What the baseline forked (`node`, `python3`, ...); the runtime's name when unset. */
  forkName?: string;
  n: number;
  /** Which round of the bench (each storm of each round on a server of its own). */
  round: number;
  /** 'first': a new environment's first burst (its pool holds its size); 'next': a burst 10 s after another (the pool has grown). */
  burst: 'first' | 'next';
  /** Each first call's time from the storm's start, µs. */
  calls: number[];
  /** Each fork's time from the baseline storm's start, µs. */
  forks: number[];
  failed: number;
  firstError?: string;
  /**
   * The whole machine's CPU during the burst, and during the forks, per call, ms: every process (server, spawner,
   * sandboxes, workers) and the kernel's own work. On a machine whose cores a burst saturates, the ratio of the two
   * is the floor of the storm's ratio.
   */
  cpuMsPerCall: number;
  cpuMsPerFork: number;
  /**
   * The same forks inside Flint's sandbox (its bwrap command line, no cgroups), with the sandbox on: each one's time
   * from their storm's start, µs, and the machine's CPU per fork, ms. What the sandbox alone adds to a process start.
   */
  sandboxedForks?: number[];
  cpuMsPerSandboxedFork?: number;
  /** Why the sandboxed forks failed, when they did (the storm and the plain forks still count). */
  sandboxedError?: string;
}
