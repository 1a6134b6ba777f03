// The benchmark's environment knobs, read and checked once before anything
// starts: a typo should stop the run at once, not after minutes of measuring
// with NaN requests.

export interface BenchKnobs {
  /** Sequential requests per latency figure. */
  requests: number;
  /** wrk duration of each throughput round, in seconds. */
  seconds: number;
  /** Throughput rounds. */
  rounds: number;
  /** Server pairs (authentication on and off) the auth figure is the median of. */
  authPairs: number;
  /** Cold starts (and forks) measured. */
  cold: number;
  /** Kafka messages. */
  messages: number;
  sandbox: 'bubblewrap' | 'none';
  packages: boolean;
  kafka: boolean;
  /** Goodput under rising load beside nginx, and tails during updates (bench/overload.ts). */
  overload: boolean;
  /** Bursts of 20 and 100 first calls against as many concurrent forks (bench/storm.ts). */
  storm: boolean;
  /** Rounds of each storm (each a server of its own). */
  stormRounds: number;
  /** CLI start times against `node -e 0` (bench/cli-start.ts). */
  cli: boolean;
  /** Rounds of the CLI start figures (each runs every form of every command once). */
  cliRounds: number;
  /** Router added latency with tracing off, on, and before tracing (bench/tracing.ts). */
  tracing: boolean;
  /** Kubernetes mode with its roles apart, on the real control plane (bench/scale-out.ts). */
  scaleOut: boolean;
  /** Throughput and added latency beside nginx, HAProxy and Go's ReverseProxy against bare node:http (bench/peers.ts). */
  peers: boolean;
  /** Rounds of its executor round-trip figure (the first through a router new to the functions, the rest after 12 s idle each). */
  grantRounds: number;
}

function whole(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || n < min) throw new Error(`${name} must be a whole number of at least ${min}, not '${raw}'`);
  return n;
}

function toggle(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '' || raw === '1') return true;
  if (raw === '0') return false;
  throw new Error(`${name} must be 0 (skip) or 1 (run), not '${raw}'`);
}

export function readKnobs(env: NodeJS.ProcessEnv = process.env): BenchKnobs {
  const sandbox = env.BENCH_SANDBOX === undefined || env.BENCH_SANDBOX === '' ? 'bubblewrap' : env.BENCH_SANDBOX;
  if (sandbox !== 'bubblewrap' && sandbox !== 'none') throw new Error(`BENCH_SANDBOX must be bubblewrap or none, not '${sandbox}'`);
  return {
    requests: whole(env, 'BENCH_REQUESTS', 3000, 10),
    seconds: whole(env, 'BENCH_SECONDS', 4, 1),
    rounds: whole(env, 'BENCH_ROUNDS', 3, 1),
    authPairs: whole(env, 'BENCH_AUTH_PAIRS', 3, 1),
    cold: whole(env, 'BENCH_COLD', 15, 1),
    messages: whole(env, 'BENCH_MESSAGES', 2000, 10),
    sandbox,
    packages: toggle(env, 'BENCH_PACKAGES'),
    kafka: toggle(env, 'BENCH_KAFKA'),
    overload: toggle(env, 'BENCH_OVERLOAD'),
    storm: toggle(env, 'BENCH_STORM'),
    stormRounds: whole(env, 'BENCH_STORM_ROUNDS', 3, 1),
    cli: toggle(env, 'BENCH_CLI'),
    cliRounds: whole(env, 'BENCH_CLI_ROUNDS', 15, 3),
    tracing: toggle(env, 'BENCH_TRACING'),
    scaleOut: toggle(env, 'BENCH_SCALE_OUT'),
    grantRounds: whole(env, 'BENCH_GRANT_ROUNDS', 6, 2),
    peers: toggle(env, 'BENCH_PEERS'),
  };
}
