import type { RuntimeLaunch } from '../launch.ts';

// Filled in by the go runtime's work; until then the executor refuses go environments.
export const goLaunch: RuntimeLaunch | undefined = undefined;
