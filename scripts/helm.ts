// Helm for the chart's tests (`helm lint`, `helm template`): $HELM, else a
// helm on PATH, else one built once from its Go module into
// node_modules/.cache/flint-helm (Go is on every machine the tests run on;
// Helm's own release downloads are not reachable from them).
// `npm run helm -- <args>` runs it.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const HELM_MODULE = 'helm.sh/helm/v3/cmd/helm@v3.16.2';
const REPO = path.resolve(import.meta.dirname, '..');
const CACHE = path.join(REPO, 'node_modules', '.cache', 'flint-helm');

function onPath(bin: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (!dir) continue;
    const p = path.join(dir, bin);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {}
  }
  return undefined;
}

export function ensureHelm(): string {
  if (process.env.HELM) return process.env.HELM;
  const found = onPath('helm');
  if (found) return found;
  const cached = path.join(CACHE, 'helm');
  if (fs.existsSync(cached)) return cached;
  const go = onPath('go') ?? '/usr/local/go/bin/go';
  if (!fs.existsSync(go)) throw new Error('helm is not installed and Go, which would build it, is not either: install Go 1.22+ or set HELM');
  fs.mkdirSync(CACHE, { recursive: true });
  process.stderr.write(`building ${HELM_MODULE} into ${path.relative(REPO, CACHE)} (once)\n`);
  execFileSync(go, ['install', HELM_MODULE], { env: { ...process.env, GOBIN: CACHE, CGO_ENABLED: '0' }, stdio: ['ignore', 'inherit', 'inherit'], timeout: 20 * 60_000 });
  return cached;
}

if (import.meta.main) {
  const r = spawnSync(ensureHelm(), process.argv.slice(2), { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
