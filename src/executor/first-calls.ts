// First calls the executor expects: a function created, or given new code,
// while the server runs has no instance of that code yet, so its next call
// is a cold start. Deployments come in batches (an application's functions,
// a CI pipeline's update of all of them), and their first calls then come in
// a burst that takes far more warm workers than a pool's size: each one
// missing is a whole process start on a request's path, and on a small
// machine those starts queue behind each other.
//
// So for a while after such a change, each of these functions counts for one
// more warm worker in its environment's pool (env-pool.ts), started in the
// background before anyone calls. A function stops counting when the start
// of an instance of it begins, when it is deleted, or when the window has
// passed without a call. Functions the server finds at start are not
// counted: nothing says they will be called soon, and a restart of a server
// holding a thousand idle functions should not start a pool's growth limit
// of workers. Both backends keep these counts: the local one in its
// EnvPool's target, the kubernetes one in its pool Deployment's replicas.
import type { FunctionResource, Package } from '../api/kinds.ts';
import { archiveShas } from '../archive/refs.ts';
import { isNewdeploy, slotKey as keyOf } from './core/instance-core.ts';

/**
 * The most workers (pods) demand adds to a pool's size, bursts and expected first calls alike. In local mode the
 * instance budget's share for growth (three quarters) is what bounds their memory; this bounds one environment's
 * start-up work, and still lets a deploy of a hundred functions find a warm worker each (at 64, a third of such a
 * burst started on its requests' path).
 */
export const MAX_GROWTH = 128;

interface Expected {
  env: string;
  until: number;
}

export class ExpectedFirstCalls {
  readonly #windowMs: number;
  readonly #now: () => number;
  /**
   * Function key -> what is expected of it. Every entry gets the same window and is re-inserted when renewed, so
   * the map's order is the order of expiry: expired entries are always at its head.
   */
  readonly #expected = new Map<string, Expected>();
  /** Environment key -> how many entries of #expected name it. */
  readonly #counts = new Map<string, number>();
  /** Function key -> the code version last seen, so a change that does not touch the code is not counted again. */
  readonly #seen = new Map<string, string>();

  /** `windowMs`: how long a new function counts; 0 turns this off. */
  constructor(windowMs: number, now: () => number = Date.now) {
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /**
   * A function as the executor now knows it, in environment `env` (its key), at code `version`. `announced`: it was
   * created or changed while the server ran (a watch event), not found at start. `runnable`: it has code an
   * instance could start with (a package still building, or one that is missing, has none). True when it now
   * counts as expected.
   */
  note(fn: string, env: string, version: string, announced: boolean, runnable = true): boolean {
    const before = this.#seen.get(fn);
    this.#seen.set(fn, version);
    if (this.#windowMs <= 0 || !announced || before === version) return false;
    this.#remove(fn);
    if (!runnable) return false;
    this.#expected.set(fn, { env, until: this.#now() + this.#windowMs });
    this.#counts.set(env, (this.#counts.get(env) ?? 0) + 1);
    return true;
  }

  /**
   * An instance of the function at `version` is starting: its first call no longer needs a warm worker of its own.
   * True when the function was counted until now.
   */
  started(fn: string, version: string): boolean {
    this.#seen.set(fn, version);
    return this.#remove(fn);
  }

  /** The function is gone, or no longer uses its environment's pool. */
  forget(fn: string): void {
    this.#remove(fn);
    this.#seen.delete(fn);
  }

  /** The functions of environment `env` whose first call is expected now. */
  count(env: string): number {
    const now = this.#now();
    for (const [fn, e] of this.#expected) {
      if (e.until > now) break;
      this.#remove(fn);
    }
    return this.#counts.get(env) ?? 0;
  }

  #remove(fn: string): boolean {
    const e = this.#expected.get(fn);
    if (e === undefined) return false;
    this.#expected.delete(fn);
    const n = (this.#counts.get(e.env) ?? 1) - 1;
    if (n > 0) this.#counts.set(e.env, n);
    else this.#counts.delete(e.env);
    return true;
  }
}

/** The environment key (`namespace/name`) of the pool a function takes its instances from. */
function poolKeyOf(fn: FunctionResource): string {
  const envRef = fn.spec.environment;
  return keyOf(envRef.namespace ?? fn.metadata.namespace, envRef.name);
}

/**
 * Tells `calls` about a function as an executor's watch (`announced`) or its start-up list delivered it, at code
 * `version`, with `packages` as the executor knows them. A newdeploy function keeps pods of its own and takes none
 * from the pool; one without code to start yet (its package missing or still building) counts once its code lands.
 * Returns the key of the environment whose pool should grow for it, if any.
 */
export function expectFirstCall(calls: ExpectedFirstCalls, fn: FunctionResource, packages: ReadonlyMap<string, Package>, version: string, announced: boolean): string | undefined {
  const key = keyOf(fn.metadata.namespace, fn.metadata.name);
  if (isNewdeploy(fn)) {
    calls.forget(key);
    return undefined;
  }
  const ref = fn.spec.package.packageref;
  const pkg = packages.get(keyOf(ref.namespace ?? fn.metadata.namespace, ref.name));
  const runnable = pkg !== undefined && archiveShas(pkg.spec.deployment).length > 0;
  const env = poolKeyOf(fn);
  return calls.note(key, env, version, announced, runnable) ? env : undefined;
}

/** The functions whose package is `pkg`. */
export function functionsOf(pkg: Package, functions: Iterable<FunctionResource>): FunctionResource[] {
  const out: FunctionResource[] = [];
  for (const fn of functions) {
    const ref = fn.spec.package.packageref;
    if (ref.name === pkg.metadata.name && (ref.namespace ?? fn.metadata.namespace) === pkg.metadata.namespace) out.push(fn);
  }
  return out;
}
