// The runtimes local mode can run, by name.
import type { RuntimeName } from '../api/images.ts';
import { goLaunch } from './go/launch.ts';
import type { RuntimeLaunch, RuntimeLaunches } from './launch.ts';
import { nodeLaunch } from './node/launch.ts';
import { pythonLaunch } from './python/launch.ts';

export type { BuilderLaunch, BuilderSource, RuntimeBind, RuntimeLaunch } from './launch.ts';

const LAUNCHES: RuntimeLaunches = { node: nodeLaunch, python: pythonLaunch, go: goLaunch };

export function runtimeLaunch(name: RuntimeName): RuntimeLaunch | undefined {
  return LAUNCHES[name];
}
