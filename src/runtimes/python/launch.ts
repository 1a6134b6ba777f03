import type { RuntimeLaunch } from '../launch.ts';

// Filled in by the python runtime's work; until then the executor refuses python environments.
export const pythonLaunch: RuntimeLaunch | undefined = undefined;
