// What a package's status becomes when it is written through the API. The
// status belongs to the system: a client's copy is ignored.
import type { Package, PackageStatus } from '../api/kinds.ts';

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

function fresh(buildstatus: PackageStatus['buildstatus']): PackageStatus {
  return { buildstatus, buildlog: '', lastUpdateTimestamp: new Date().toISOString() };
}

/** A deployment (given, or built before) is ready at once; a source alone waits for its build. */
export function initialPackageStatus(pkg: Package): PackageStatus {
  return fresh(pkg.spec.deployment ? 'succeeded' : 'pending');
}

/**
 * A new source, build command or environment is built again; until that
 * build succeeds the package keeps its current deployment, so functions keep
 * serving the old code. A new deployment alone is ready at once.
 */
export function packageStatusAfterUpdate(current: Package, next: Package): PackageStatus | undefined {
  const rebuild =
    next.spec.source !== undefined &&
    (!same(next.spec.source, current.spec.source) || !same(next.spec.buildcmd, current.spec.buildcmd) || !same(next.spec.environment, current.spec.environment));
  if (rebuild) return fresh('pending');
  if (!same(next.spec.deployment, current.spec.deployment)) return fresh(next.spec.deployment ? 'succeeded' : 'pending');
  return current.status;
}
