// require() for the runtime's own loads (the user's code by absolute path,
// and ws). Based at the entry script rather than at this file: the entry
// exists both for the sources (server.ts) and for the bundle
// (server.bundle.cjs), where import.meta has no url, and a bare name
// resolves from either alike (/flint/node_modules in the sandbox, the
// checkout's node_modules outside it). Not a static require either, which
// the bundler would follow and inline.
import { createRequire } from 'node:module';
import path from 'node:path';

export const requireFromEntry: NodeJS.Require = createRequire(path.resolve(process.argv[1] ?? 'flint-runtime'));
