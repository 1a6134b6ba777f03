// Regenerates the committed artifacts (OpenAPI document, CLI reference, CRDs,
// the chart's values schema).
// Tests regenerate them too and fail on a diff, so run this after changing
// a schema, a route or a command.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CRD_DIR, renderCrdFiles } from '../src/api/crds.ts';
import { dataLayout } from '../src/config/layout.ts';
import { renderValuesSchema, VALUES_SCHEMA_FILE } from '../src/config/values-schema.ts';
import { createController } from '../src/controller/app.ts';
import { OPENAPI_FILE, renderOpenApi } from '../src/controller/openapi.ts';
import { openSqliteStore } from '../src/store/sqlite.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-gen-'));
const store = openSqliteStore(path.join(dir, 'flint.db'));
const app = await createController({
  store,
  layout: dataLayout(dir),
  info: () => ({ version: '', mode: 'local', routerUrl: '', authentication: { enabled: false, authUriPath: '/auth/login' } }),
  localImages: true,
  reservedPaths: [],
});
fs.writeFileSync(OPENAPI_FILE, await renderOpenApi(app));
await app.close();
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
console.log(`wrote ${path.relative(process.cwd(), new URL(OPENAPI_FILE).pathname)}`);

const referenceModule = '../src/cli/reference.ts';
const reference = await import(referenceModule).catch(() => undefined);
if (reference) {
  await reference.writeReference();
  console.log('wrote docs/cli-reference.md');
}

fs.rmSync(CRD_DIR, { recursive: true, force: true });
fs.mkdirSync(CRD_DIR, { recursive: true });
for (const [name, text] of renderCrdFiles()) fs.writeFileSync(path.join(CRD_DIR, name), text);
console.log(`wrote ${path.relative(process.cwd(), CRD_DIR)}`);

fs.writeFileSync(VALUES_SCHEMA_FILE, renderValuesSchema());
console.log(`wrote ${path.relative(process.cwd(), VALUES_SCHEMA_FILE)}`);

const { BUNDLE_FILE, renderNodeRuntimeBundle } = await import('./build-node-runtime.ts');
fs.writeFileSync(BUNDLE_FILE, await renderNodeRuntimeBundle());
console.log(`wrote ${path.relative(process.cwd(), BUNDLE_FILE)}`);
