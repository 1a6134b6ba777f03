// The routers bench/tracing.ts measures, in one process of their own so that
// they share its CPU placement, heap and event loop, and differ only in
// their code: `before` (the router as it was before tracing, from a `git
// archive` of TRACING_BEFORE_REV), `off` (now, tracing off), `on` (now,
// every request traced and exported to an OTLP receiver) and `unsampled`
// (now, tracing on at sampleRatio 0: traceparent handling without spans).
// All send to the same worker through the same stand-in executor. Each
// router but `on` loads its code from a copy of its own (`off` and
// `unsampled` from copies of the tree as it is now), so each router's code
// is optimized for its own traffic only, as `before`'s is: loaded from one
// place, the routers of now would share their functions, each warmed by
// the others' calls too.
//   node bench/tracing-routers.ts <worker socket> <before copy or -> <now copy> <another now copy> <OTLP endpoint>
// Prints one JSON line {name: url}; stops on SIGTERM.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import type { AnyResource } from '../src/api/kinds.ts';
import { createRouter, type RouterOptions } from '../src/router/router.ts';
import { FakeExecutor } from '../src/router/testing/fake-executor.ts';
import { fnObj, routeObj } from '../src/router/testing/fixtures.ts';
import { openSqliteStore } from '../src/store/sqlite.ts';
import { startTracing } from '../src/tracing/index.ts';

const [socketPath, beforeDir, nowDir, nowDir2, otlpEndpoint] = process.argv.slice(2);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-bench-trace-routers-'));
const store = openSqliteStore(path.join(dir, 'flint.db'));
for (const o of [fnObj('hello'), routeObj('hello', { relativeurl: '/hello' })] as AnyResource[]) {
  await store.create({ ...o, metadata: { name: o.metadata.name, namespace: o.metadata.namespace } } as AnyResource);
}
const logger = pino({ level: 'silent' });
const executor = new FakeExecutor({ socketPath });
const base: RouterOptions = { store, executor, logger, host: '127.0.0.1', port: 0 };
const tracingOpts = { version: 'bench', instanceId: 'bench', role: 'router', warn: (m: string) => process.stderr.write(`${m}\n`) };
const on = startTracing({ otlpEndpoint, serviceName: 'flint-bench', sampleRatio: 1 }, tracingOpts);
const unsampled = startTracing({ otlpEndpoint, serviceName: 'flint-bench', sampleRatio: 0 }, tracingOpts);

type Startable = { start(): Promise<{ url: string }>; stop(): Promise<void> };
const copyOf = async (dir: string) => (await import(path.join(dir, 'src', 'router', 'router.ts'))) as { createRouter(o: unknown): Startable };
const routers: Record<string, Startable> = {
  off: (await copyOf(nowDir)).createRouter(base),
  on: createRouter({ ...base, tracer: on.tracer }),
  unsampled: (await copyOf(nowDir2)).createRouter({ ...base, tracer: unsampled.tracer }),
};
if (beforeDir !== '-') {
  routers.before = (await copyOf(beforeDir)).createRouter(base);
}
const urls: Record<string, string> = {};
for (const [name, r] of Object.entries(routers)) urls[name] = (await r.start()).url;
process.stdout.write(`${JSON.stringify(urls)}\n`);

process.on('SIGTERM', async () => {
  for (const r of Object.values(routers)) await r.stop();
  await on.shutdown();
  await unsampled.shutdown();
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(0);
});
